-- user_version 3
-- index conversations_updated
CREATE INDEX conversations_updated ON conversations(updated_at DESC, id DESC);
-- index jobs_created
CREATE INDEX jobs_created ON jobs(created_at DESC, id DESC);
-- index timers_pending
CREATE INDEX timers_pending ON timers(due_at) WHERE fired = 0;
-- index turns_audio
CREATE INDEX turns_audio ON turns(audio_path) WHERE audio_path IS NOT NULL;
-- table audio_trash
CREATE TABLE audio_trash (
    path       TEXT PRIMARY KEY,
    trashed_at INTEGER NOT NULL
) WITHOUT ROWID;
-- table conversations
CREATE TABLE conversations (
    id         INTEGER PRIMARY KEY,
    title      TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
-- table jobs
CREATE TABLE jobs (
    id          INTEGER PRIMARY KEY,
    kind        TEXT    NOT NULL,
    status      TEXT    NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    config      TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(config)),
    progress    TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(progress)),
    error       TEXT    NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    started_at  INTEGER,
    finished_at INTEGER
);
-- table settings
CREATE TABLE settings (
    key        TEXT PRIMARY KEY,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
-- table timers
CREATE TABLE timers (
    id          TEXT    PRIMARY KEY,
    kind        TEXT    NOT NULL DEFAULT 'timer',
    label       TEXT    NOT NULL DEFAULT '',
    due_at      INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL DEFAULT 0,
    lang        TEXT    NOT NULL DEFAULT '',
    fired       INTEGER NOT NULL DEFAULT 0 CHECK (fired IN (0, 1)),
    created_at  INTEGER NOT NULL
) WITHOUT ROWID;
-- table turns
CREATE TABLE turns (
    id              INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    role            TEXT    NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    text            TEXT    NOT NULL,
    -- SenseVoice rich tags of a user turn (e.g. 'en', 'HAPPY', 'Speech'); the voice of an
    -- assistant turn.
    language        TEXT    NOT NULL DEFAULT '',
    emotion         TEXT    NOT NULL DEFAULT '',
    event           TEXT    NOT NULL DEFAULT '',
    voice           TEXT    NOT NULL DEFAULT '',
    interrupted     INTEGER NOT NULL DEFAULT 0 CHECK (interrupted IN (0, 1)),
    -- The span of the turn's audio: speech for a user turn, playback for an assistant turn.
    start_at        INTEGER,
    end_at          INTEGER,
    -- Latency breakdown of the exchange that produced this turn.
    speech_end_at     INTEGER,
    transcript_at     INTEGER,
    first_token_at    INTEGER,
    first_sentence_at INTEGER,
    first_audio_at    INTEGER,
    audio_path      TEXT,
    created_at      INTEGER NOT NULL, error TEXT NOT NULL DEFAULT '',
    UNIQUE (conversation_id, seq)
);
-- table turns_fts
CREATE VIRTUAL TABLE turns_fts USING fts5(
    text,
    tokenize = 'unicode61 remove_diacritics 2'
);
-- table turns_fts_config
CREATE TABLE 'turns_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;
-- table turns_fts_content
CREATE TABLE 'turns_fts_content'(id INTEGER PRIMARY KEY, c0);
-- table turns_fts_data
CREATE TABLE 'turns_fts_data'(id INTEGER PRIMARY KEY, block BLOB);
-- table turns_fts_docsize
CREATE TABLE 'turns_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);
-- table turns_fts_idx
CREATE TABLE 'turns_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;
-- trigger turns_audio_trash_delete
CREATE TRIGGER turns_audio_trash_delete AFTER DELETE ON turns
WHEN old.audio_path IS NOT NULL AND old.audio_path <> '' BEGIN
    INSERT OR IGNORE INTO audio_trash(path, trashed_at)
    VALUES (old.audio_path, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
-- trigger turns_audio_trash_update
CREATE TRIGGER turns_audio_trash_update AFTER UPDATE OF audio_path ON turns
WHEN old.audio_path IS NOT NULL AND old.audio_path <> ''
     AND old.audio_path IS NOT new.audio_path BEGIN
    INSERT OR IGNORE INTO audio_trash(path, trashed_at)
    VALUES (old.audio_path, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
-- trigger turns_fts_delete
CREATE TRIGGER turns_fts_delete AFTER DELETE ON turns BEGIN
    DELETE FROM turns_fts WHERE rowid = old.id;
END;
-- trigger turns_fts_insert
CREATE TRIGGER turns_fts_insert AFTER INSERT ON turns BEGIN
    INSERT INTO turns_fts(rowid, text) VALUES (new.id, parley_fts_text(new.text));
END;
-- trigger turns_fts_update
CREATE TRIGGER turns_fts_update AFTER UPDATE OF text ON turns BEGIN
    UPDATE turns_fts SET text = parley_fts_text(new.text) WHERE rowid = new.id;
END;

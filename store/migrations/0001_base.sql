-- v1: the base schema. Times are Unix milliseconds (UTC); NULL means "not recorded".

CREATE TABLE conversations (
    id         INTEGER PRIMARY KEY,
    title      TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX conversations_updated ON conversations(updated_at DESC, id DESC);

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
    created_at      INTEGER NOT NULL,
    UNIQUE (conversation_id, seq)
);

-- Timers and alarms of the offline skills; the id is chosen by the skills engine.
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
CREATE INDEX timers_pending ON timers(due_at) WHERE fired = 0;

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
CREATE INDEX jobs_created ON jobs(created_at DESC, id DESC);

CREATE TABLE settings (
    key        TEXT PRIMARY KEY,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

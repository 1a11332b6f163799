-- v2: full-text search over turn text, and crash-safe deletion of saved audio files.

-- FTS5 over turn text. The indexed copy is parley_fts_text(text): the text with a zero-width
-- space around every CJK character, so that unicode61 makes each Han/kana/Hangul character a
-- token and a query such as 天气 (searched as the phrase "天 气") finds it inside 今天天气很好.
-- rowid = turns.id.
CREATE VIRTUAL TABLE turns_fts USING fts5(
    text,
    tokenize = 'unicode61 remove_diacritics 2'
);

INSERT INTO turns_fts(rowid, text) SELECT id, parley_fts_text(text) FROM turns;

CREATE TRIGGER turns_fts_insert AFTER INSERT ON turns BEGIN
    INSERT INTO turns_fts(rowid, text) VALUES (new.id, parley_fts_text(new.text));
END;
CREATE TRIGGER turns_fts_update AFTER UPDATE OF text ON turns BEGIN
    UPDATE turns_fts SET text = parley_fts_text(new.text) WHERE rowid = new.id;
END;
CREATE TRIGGER turns_fts_delete AFTER DELETE ON turns BEGIN
    DELETE FROM turns_fts WHERE rowid = old.id;
END;

-- Saved audio files waiting to be deleted. A path is moved here in the same transaction
-- that stops a turn referencing it; the file is deleted afterwards and then the row. A crash
-- in between leaves the row, and the next Open finishes the job: no turn ever points at a
-- deleted file, and no file is leaked.
CREATE TABLE audio_trash (
    path       TEXT PRIMARY KEY,
    trashed_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TRIGGER turns_audio_trash_delete AFTER DELETE ON turns
WHEN old.audio_path IS NOT NULL AND old.audio_path <> '' BEGIN
    INSERT OR IGNORE INTO audio_trash(path, trashed_at)
    VALUES (old.audio_path, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;
CREATE TRIGGER turns_audio_trash_update AFTER UPDATE OF audio_path ON turns
WHEN old.audio_path IS NOT NULL AND old.audio_path <> ''
     AND old.audio_path IS NOT new.audio_path BEGIN
    INSERT OR IGNORE INTO audio_trash(path, trashed_at)
    VALUES (old.audio_path, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;

CREATE INDEX turns_audio ON turns(audio_path) WHERE audio_path IS NOT NULL;

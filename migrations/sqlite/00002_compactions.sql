-- +goose Up
ALTER TABLE messages ADD COLUMN replaces TEXT NOT NULL DEFAULT '[]';
ALTER TABLE sessions ADD COLUMN compaction_round INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN auto_paused_below INTEGER NOT NULL DEFAULT 0;

CREATE TABLE compactions (
    tenant        TEXT    NOT NULL,
    session_id    TEXT    NOT NULL,
    id            TEXT    NOT NULL,
    round         INTEGER NOT NULL,
    tiers         TEXT    NOT NULL,
    tokens_before INTEGER NOT NULL,
    tokens_after  INTEGER NOT NULL,
    items         TEXT    NOT NULL,
    summary       TEXT    NOT NULL DEFAULT '',
    view_before   TEXT    NOT NULL,
    view_after    TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,
    reverted_at   INTEGER,
    PRIMARY KEY (tenant, session_id, id),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, id) ON DELETE CASCADE
);
CREATE INDEX compactions_by_time ON compactions (tenant, session_id, created_at);

-- +goose Down
DROP TABLE compactions;
ALTER TABLE sessions DROP COLUMN auto_paused_below;
ALTER TABLE sessions DROP COLUMN compaction_round;
ALTER TABLE messages DROP COLUMN replaces;

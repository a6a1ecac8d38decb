-- +goose Up
-- Synthetic messages (summaries, placeholders) list the ids they stand in for.
ALTER TABLE messages ADD COLUMN replaces text NOT NULL DEFAULT '[]';
ALTER TABLE sessions ADD COLUMN compaction_round integer NOT NULL DEFAULT 0;
-- Auto-compaction is paused while active_tokens stays below this (0: not paused).
ALTER TABLE sessions ADD COLUMN auto_paused_below bigint NOT NULL DEFAULT 0;

CREATE TABLE compactions (
    tenant        text        NOT NULL,
    session_id    text        NOT NULL,
    id            text        NOT NULL,
    round         integer     NOT NULL,
    tiers         text        NOT NULL,
    tokens_before bigint      NOT NULL,
    tokens_after  bigint      NOT NULL,
    items         text        NOT NULL,
    summary       text        NOT NULL DEFAULT '',
    view_before   text        NOT NULL,
    view_after    text        NOT NULL,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    reverted_at   timestamptz,
    PRIMARY KEY (tenant, session_id, id),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, id) ON DELETE CASCADE
);
CREATE INDEX compactions_by_time ON compactions (tenant, session_id, created_at);

-- +goose Down
DROP TABLE compactions;
ALTER TABLE sessions DROP COLUMN auto_paused_below;
ALTER TABLE sessions DROP COLUMN compaction_round;
ALTER TABLE messages DROP COLUMN replaces;

-- +goose Up
-- What a session's model calls cost, fed by ReportUsage ("calls") and by the
-- summarizer's own LLM calls ("overhead"); updated only by atomic increments.
CREATE TABLE session_ledger (
    tenant             TEXT    NOT NULL,
    session_id         TEXT    NOT NULL,
    kind               TEXT    NOT NULL,
    calls              INTEGER NOT NULL DEFAULT 0,
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    cost_nano_usd      INTEGER NOT NULL DEFAULT 0,
    unpriced_calls     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, session_id, kind),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, id) ON DELETE CASCADE
);

-- What the session's latest PrepareContext returned, for prompt-cache hints:
-- a digest of model, system prompt and tools, and the message ids (runs of
-- consecutive log messages written as "msg_7..40").
CREATE TABLE prepared_views (
    tenant      TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    fixed       TEXT NOT NULL,
    message_ids TEXT NOT NULL,
    PRIMARY KEY (tenant, session_id),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, id) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE prepared_views;
DROP TABLE session_ledger;

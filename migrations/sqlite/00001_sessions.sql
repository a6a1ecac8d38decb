-- +goose Up
-- Times are Unix nanoseconds (truncated to microseconds, as in PostgreSQL).
CREATE TABLE sessions (
    tenant        TEXT    NOT NULL,
    id            TEXT    NOT NULL,
    model         TEXT    NOT NULL,
    system_prompt TEXT    NOT NULL DEFAULT '',
    tools         TEXT    NOT NULL DEFAULT '[]',
    policy        TEXT    NOT NULL DEFAULT '{}',
    labels        TEXT    NOT NULL DEFAULT '{}',
    version       INTEGER NOT NULL,
    system_tokens INTEGER NOT NULL DEFAULT 0,
    tools_tokens  INTEGER NOT NULL DEFAULT 0,
    active_tokens INTEGER NOT NULL DEFAULT 0,
    active_count  INTEGER NOT NULL DEFAULT 0,
    log_count     INTEGER NOT NULL DEFAULT 0,
    view_seq      INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    deleted_at    INTEGER,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX sessions_listing ON sessions (tenant, created_at DESC, id DESC) WHERE deleted_at IS NULL;

CREATE TABLE messages (
    tenant     TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    id         TEXT    NOT NULL,
    position   INTEGER NOT NULL,
    role       TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    name       TEXT    NOT NULL DEFAULT '',
    pinned     INTEGER NOT NULL DEFAULT 0,
    parts      TEXT    NOT NULL,
    metadata   TEXT    NOT NULL DEFAULT '{}',
    tokens     INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, session_id, id),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX messages_log ON messages (tenant, session_id, position) WHERE position > 0;

CREATE TABLE view_entries (
    tenant     TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    ord        INTEGER NOT NULL,
    message_id TEXT    NOT NULL,
    PRIMARY KEY (tenant, session_id, ord),
    FOREIGN KEY (tenant, session_id, message_id) REFERENCES messages (tenant, session_id, id) ON DELETE CASCADE
);

CREATE TABLE tool_calls (
    tenant          TEXT    NOT NULL,
    session_id      TEXT    NOT NULL,
    call_id         TEXT    NOT NULL,
    position        INTEGER NOT NULL,
    result_position INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, session_id, call_id),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, id) ON DELETE CASCADE
);

CREATE TABLE idempotency_keys (
    tenant       TEXT    NOT NULL,
    session_id   TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    request_hash TEXT    NOT NULL,
    response     BLOB    NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant, session_id, key),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, id) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE idempotency_keys;
DROP TABLE tool_calls;
DROP TABLE view_entries;
DROP TABLE messages;
DROP TABLE sessions;

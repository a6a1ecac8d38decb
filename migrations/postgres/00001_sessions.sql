-- +goose Up
CREATE TABLE sessions (
    tenant        text        NOT NULL,
    id            text        NOT NULL,
    model         text        NOT NULL,
    system_prompt text        NOT NULL DEFAULT '',
    tools         text        NOT NULL DEFAULT '[]',
    policy        text        NOT NULL DEFAULT '{}',
    labels        jsonb       NOT NULL DEFAULT '{}',
    version       bigint      NOT NULL,
    system_tokens bigint      NOT NULL DEFAULT 0,
    tools_tokens  bigint      NOT NULL DEFAULT 0,
    active_tokens bigint      NOT NULL DEFAULT 0,
    active_count  bigint      NOT NULL DEFAULT 0,
    log_count     bigint      NOT NULL DEFAULT 0,
    view_seq      bigint      NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    deleted_at    timestamptz,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX sessions_listing ON sessions (tenant, created_at DESC, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX sessions_labels ON sessions USING gin (labels);

-- Every message ever appended (position > 0) plus messages that compaction
-- writes into the active view (summaries, placeholders: position 0).
CREATE TABLE messages (
    tenant     text        NOT NULL,
    session_id text        NOT NULL,
    id         text        NOT NULL,
    position   bigint      NOT NULL,
    role       text        NOT NULL,
    kind       text        NOT NULL,
    name       text        NOT NULL DEFAULT '',
    pinned     boolean     NOT NULL DEFAULT false,
    parts      text        NOT NULL,
    metadata   text        NOT NULL DEFAULT '{}',
    tokens     bigint      NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, session_id, id),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX messages_log ON messages (tenant, session_id, position) WHERE position > 0;

-- The active view: what is sent to the model, in order.
CREATE TABLE view_entries (
    tenant     text   NOT NULL,
    session_id text   NOT NULL,
    ord        bigint NOT NULL,
    message_id text   NOT NULL,
    PRIMARY KEY (tenant, session_id, ord),
    FOREIGN KEY (tenant, session_id, message_id) REFERENCES messages (tenant, session_id, id) ON DELETE CASCADE
);

CREATE TABLE tool_calls (
    tenant          text   NOT NULL,
    session_id      text   NOT NULL,
    call_id         text   NOT NULL,
    position        bigint NOT NULL,
    result_position bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, session_id, call_id),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, id) ON DELETE CASCADE
);

CREATE TABLE idempotency_keys (
    tenant       text        NOT NULL,
    session_id   text        NOT NULL,
    key          text        NOT NULL,
    request_hash text        NOT NULL,
    response     bytea       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, session_id, key),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, id) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE idempotency_keys;
DROP TABLE tool_calls;
DROP TABLE view_entries;
DROP TABLE messages;
DROP TABLE sessions;

-- +goose Up
-- The gateway's history index (store/history.go): one row per client
-- message of a session's log, keyed by the rolling digest of the history up
-- to it. head marks each session's newest row: a session whose head is a
-- prefix of a request's history is the request's session. Written in the
-- transaction of the append, deleted with the session.
CREATE TABLE history_index (
    tenant     text    NOT NULL,
    session_id text    NOT NULL,
    length     bigint  NOT NULL,
    chain      text    NOT NULL,
    head       boolean NOT NULL,
    PRIMARY KEY (tenant, session_id, length),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, id) ON DELETE CASCADE
);
CREATE INDEX history_index_chain ON history_index (tenant, chain, head);
-- The session's head, which each append moves: found without reading the
-- session's other rows.
CREATE INDEX history_index_head ON history_index (tenant, session_id) WHERE head;

-- +goose Down
DROP TABLE history_index;

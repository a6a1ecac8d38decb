-- +goose Up
-- Sessions by the summary a client compacted its history with
-- (store/summaries.go): the digest of the latest answer each session gave
-- to a summary request without a signal, so a compacted history that keeps
-- no call finds its session on any replica and after a restart
-- (gateway/unsignalledsummary.go). One row per session.
CREATE TABLE summaries_by_digest (
    tenant     TEXT NOT NULL,
    session_id TEXT NOT NULL,
    digest     TEXT NOT NULL,
    PRIMARY KEY (tenant, session_id),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, id) ON DELETE CASCADE
);
CREATE INDEX summaries_by_digest_digest ON summaries_by_digest (tenant, digest);

-- +goose Down
DROP TABLE summaries_by_digest;

-- +goose Up
-- Background compaction: at most one job per session (engine/background.go).
CREATE TABLE compaction_jobs (
    tenant      text        NOT NULL,
    session_id  text        NOT NULL,
    id          text        NOT NULL,
    state       text        NOT NULL,
    epoch       integer     NOT NULL,
    fingerprint text        NOT NULL,
    owner       text        NOT NULL DEFAULT '',
    lease_until timestamptz NOT NULL DEFAULT 'epoch',
    attempts    integer     NOT NULL DEFAULT 0,
    not_before  timestamptz NOT NULL DEFAULT 'epoch',
    result      bytea,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant, session_id),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, id) ON DELETE CASCADE
);
CREATE INDEX compaction_jobs_by_state ON compaction_jobs (state, updated_at);
CREATE INDEX compaction_jobs_by_tenant ON compaction_jobs (tenant, state);

-- +goose Down
DROP TABLE compaction_jobs;

-- +goose Up
-- Background compaction: at most one job per session (engine/background.go).
-- Times are Unix nanoseconds, as elsewhere in this schema.
CREATE TABLE compaction_jobs (
    tenant      TEXT    NOT NULL,
    session_id  TEXT    NOT NULL,
    id          TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    epoch       INTEGER NOT NULL,
    fingerprint TEXT    NOT NULL,
    owner       TEXT    NOT NULL DEFAULT '',
    lease_until INTEGER NOT NULL DEFAULT 0,
    attempts    INTEGER NOT NULL DEFAULT 0,
    not_before  INTEGER NOT NULL DEFAULT 0,
    result      BLOB,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, session_id),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, id) ON DELETE CASCADE
);
CREATE INDEX compaction_jobs_by_state ON compaction_jobs (state, updated_at);
CREATE INDEX compaction_jobs_by_tenant ON compaction_jobs (tenant, state);

-- +goose Down
DROP TABLE compaction_jobs;

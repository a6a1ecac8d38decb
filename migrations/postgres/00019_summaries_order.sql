-- +goose Up
-- The order of a session's summary records (store.SummaryRecord): version
-- (the session's, when the summary request was resolved), then seq (the
-- request's arrival, Unix nanoseconds); the upsert replaces a row only
-- with a newer record (store.SummaryRecord), so an older answer
-- whose record lands late leaves the newer one. A column of its own, not
-- an edit of 00017: 00017 is released and applied. The rows before it get
-- version -1 and seq 0, below every record (sessions start at version 1,
-- and a record's seq is a time after 1970), so any record replaces them.
-- The defaults stay: a replica not yet upgraded inserts without them (its
-- row is replaced by any record) and updates only the digest. Constant
-- defaults: no rewrite of the table.
ALTER TABLE summaries_by_digest ADD COLUMN version BIGINT NOT NULL DEFAULT -1,
    ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE summaries_by_digest DROP COLUMN version, DROP COLUMN seq;

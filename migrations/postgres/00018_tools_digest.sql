-- +goose Up
-- The digest of a session's tools (SHA-256 of the tools column's UTF-8
-- text), written with them, and the row's version it was written at: a
-- read of the row leaves the column out when the reader already holds the
-- tools of that digest and the digest is of the row's version
-- (store/postgres/toolsdigest.go). Every writer of this version writes
-- both on every insert and update of the row; a writer before it (a
-- replica not yet upgraded) changes the version with the tools and leaves
-- them, so its row is read whole. NULL matches nothing. The rows before
-- it are left without (no backfill: an UPDATE of every row here would hold
-- the ALTER's exclusive lock on sessions while it detoasts and hashes every
-- session's tools, every read and write of every replica waiting); each
-- gets its digest at its next update, which writes the digest of the tools
-- the locked row holds when the row's does not count.
ALTER TABLE sessions ADD COLUMN tools_digest bytea, ADD COLUMN tools_digest_version bigint;

-- +goose Down
ALTER TABLE sessions DROP COLUMN tools_digest, DROP COLUMN tools_digest_version;

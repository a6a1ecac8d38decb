-- +goose Up
-- The digest of a session's tools (SHA-256 of the tools column's UTF-8
-- text), written with them, and the row's version it was written at: a
-- read of the row leaves the column out when the reader already holds the
-- tools of that digest and the digest is of the row's version
-- (store/postgres/toolsdigest.go). Every writer of this version writes
-- both on every insert and update of the row; a writer before it (a
-- replica not yet upgraded) changes the version with the tools and leaves
-- them, so its row is read whole. NULL matches nothing.
ALTER TABLE sessions ADD COLUMN tools_digest bytea, ADD COLUMN tools_digest_version bigint;
UPDATE sessions SET tools_digest = sha256(convert_to(tools, 'UTF8')), tools_digest_version = version;

-- +goose Down
ALTER TABLE sessions DROP COLUMN tools_digest, DROP COLUMN tools_digest_version;

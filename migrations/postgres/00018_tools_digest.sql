-- +goose Up
-- The digest of a session's tools (SHA-256 of the tools column's UTF-8
-- text), written with them: a read of the row leaves the column out when
-- the reader already holds the tools of that digest
-- (store/postgres/toolsdigest.go). Every writer of the column writes it;
-- NULL matches no digest.
ALTER TABLE sessions ADD COLUMN tools_digest bytea;
UPDATE sessions SET tools_digest = sha256(convert_to(tools, 'UTF8'));

-- +goose Down
ALTER TABLE sessions DROP COLUMN tools_digest;

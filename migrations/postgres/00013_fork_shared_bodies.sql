-- +goose Up
-- A fork's shared prefix is stored once (docs/storage.md): a message of a
-- fork whose parts are byte for byte those of a message already stored
-- (its parent's, at the same position) is stored without them (parts '')
-- and names the row that holds them (body_session, body_id: always a row
-- that holds its own parts, never another reference), with their size
-- (body_bytes) so that RowSize reads no other row. Readers take the parts
-- from that row. When that row is deleted (purge, a deleted session's
-- archive going), the trigger below copies its parts into every row that
-- names it (copy-on-delete) and counts the copies in tenant_usage, so a
-- fork never loses a message its parent loses. A fork's insert locks the
-- rows it names (FOR SHARE): a concurrent delete waits for it and then
-- sees its rows.
ALTER TABLE messages ADD COLUMN body_session text;
ALTER TABLE messages ADD COLUMN body_id text;
ALTER TABLE messages ADD COLUMN body_bytes bigint NOT NULL DEFAULT 0;
CREATE INDEX messages_body_refs ON messages (tenant, body_session, body_id) WHERE body_session IS NOT NULL;

-- +goose StatementBegin
CREATE FUNCTION messages_body_copied() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH copied AS (
        UPDATE messages m SET parts = r.parts, body_session = NULL, body_id = NULL, body_bytes = 0
        FROM removed r
        WHERE r.body_session IS NULL AND m.tenant = r.tenant AND m.body_session = r.session_id AND m.body_id = r.id
        RETURNING m.tenant, octet_length(m.parts) AS bytes)
    UPDATE tenant_usage u SET log_bytes = u.log_bytes + c.bytes
    FROM (SELECT tenant, sum(bytes) AS bytes FROM copied GROUP BY tenant) c
    WHERE u.tenant = c.tenant;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER messages_body_copied AFTER DELETE ON messages
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION messages_body_copied();

-- +goose Down
UPDATE messages m SET parts = b.parts, body_session = NULL, body_id = NULL, body_bytes = 0
FROM messages b WHERE m.body_session IS NOT NULL AND b.tenant = m.tenant AND b.session_id = m.body_session AND b.id = m.body_id;
UPDATE tenant_usage SET log_bytes = coalesce((SELECT sum(octet_length(parts) + octet_length(metadata) + octet_length(replaces) + octet_length(id))
    FROM messages WHERE messages.tenant = tenant_usage.tenant), 0);
DROP TRIGGER messages_body_copied ON messages;
DROP FUNCTION messages_body_copied();
DROP INDEX messages_body_refs;
ALTER TABLE messages DROP COLUMN body_bytes;
ALTER TABLE messages DROP COLUMN body_id;
ALTER TABLE messages DROP COLUMN body_session;

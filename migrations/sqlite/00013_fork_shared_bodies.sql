-- +goose Up
-- A fork's shared prefix is stored once (docs/storage.md): a message of a
-- fork whose parts are byte for byte those of a message already stored
-- (its parent's, at the same position) is stored without them (parts '')
-- and names the row that holds them (body_session, body_id: always a row
-- that holds its own parts, never another reference), with their size
-- (body_bytes) so that RowSize reads no other row. Readers take the parts
-- from that row. When that row is deleted (purge, a deleted session's
-- archive going), the trigger below copies its parts into one row that
-- names it (the heir, copy-on-delete), makes the others name the heir, and
-- counts the copy in tenant_usage: a fork never loses a message its parent
-- loses, and parts shared by N forks are stored once, not N times, after
-- the parent goes (its work: one copy and one small update a naming row).
ALTER TABLE messages ADD COLUMN body_session TEXT;
ALTER TABLE messages ADD COLUMN body_id TEXT;
ALTER TABLE messages ADD COLUMN body_bytes INTEGER NOT NULL DEFAULT 0;
CREATE INDEX messages_body_refs ON messages (tenant, body_session, body_id) WHERE body_session IS NOT NULL;

-- +goose StatementBegin
-- The heir is the first row naming OLD (by session and id): the others are
-- made to name it, then it takes OLD's parts. The heir stays the first of
-- those naming OLD while the others move, so each statement finds it.
CREATE TRIGGER messages_body_copied AFTER DELETE ON messages
WHEN OLD.body_session IS NULL AND EXISTS (SELECT 1 FROM messages WHERE tenant = OLD.tenant AND body_session = OLD.session_id AND body_id = OLD.id)
BEGIN
    UPDATE tenant_usage SET log_bytes = log_bytes + octet_length(OLD.parts) WHERE tenant = OLD.tenant;
    UPDATE messages SET (body_session, body_id) = (SELECT h.session_id, h.id FROM messages h
            WHERE h.tenant = OLD.tenant AND h.body_session = OLD.session_id AND h.body_id = OLD.id
            ORDER BY h.session_id, h.id LIMIT 1)
    WHERE tenant = OLD.tenant AND body_session = OLD.session_id AND body_id = OLD.id
        AND (session_id, id) <> (SELECT h.session_id, h.id FROM messages h WHERE h.tenant = OLD.tenant AND h.body_session = OLD.session_id AND h.body_id = OLD.id
            ORDER BY h.session_id, h.id LIMIT 1);
    UPDATE messages SET parts = OLD.parts, body_session = NULL, body_id = NULL, body_bytes = 0
    WHERE tenant = OLD.tenant AND body_session = OLD.session_id AND body_id = OLD.id;
END;
-- +goose StatementEnd

-- +goose Down
UPDATE messages SET parts = (SELECT b.parts FROM messages b WHERE b.tenant = messages.tenant AND b.session_id = messages.body_session AND b.id = messages.body_id),
    body_session = NULL, body_id = NULL, body_bytes = 0
WHERE body_session IS NOT NULL;
UPDATE tenant_usage SET log_bytes = coalesce((SELECT sum(octet_length(parts) + octet_length(metadata) + octet_length(replaces) + octet_length(id))
    FROM messages WHERE messages.tenant = tenant_usage.tenant), 0);
DROP TRIGGER messages_body_copied;
DROP INDEX messages_body_refs;
ALTER TABLE messages DROP COLUMN body_bytes;
ALTER TABLE messages DROP COLUMN body_id;
ALTER TABLE messages DROP COLUMN body_session;

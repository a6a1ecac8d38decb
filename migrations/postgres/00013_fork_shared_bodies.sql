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
-- A fork's insert locks the rows it names (FOR KEY SHARE): a concurrent
-- delete waits for it and then sees its rows.
ALTER TABLE messages ADD COLUMN body_session text;
ALTER TABLE messages ADD COLUMN body_id text;
ALTER TABLE messages ADD COLUMN body_bytes bigint NOT NULL DEFAULT 0;
CREATE INDEX messages_body_refs ON messages (tenant, body_session, body_id) WHERE body_session IS NOT NULL;

-- +goose StatementBegin
-- For each removed row that others name, its heir is the first of them (by
-- session and id): the others are made to name the heir, which takes the
-- removed row's parts (disjoint rows: one statement updates each once).
-- The rows naming a removed row are locked first (in key order), so none
-- of them, the heir above all, is deleted between the choice and the
-- copy; one deleted meanwhile is not locked, and the next statement (its
-- own snapshot) does not see it.
CREATE FUNCTION messages_body_copied() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM removed r JOIN messages m ON m.tenant = r.tenant AND m.body_session = r.session_id AND m.body_id = r.id
        WHERE r.body_session IS NULL
        ORDER BY m.tenant, m.session_id, m.id
        FOR UPDATE OF m;
    IF NOT FOUND THEN
        RETURN NULL; -- no row named a removed one: the common delete costs one join
    END IF;
    WITH heir AS (
        SELECT DISTINCT ON (m.tenant, m.body_session, m.body_id) m.tenant, m.session_id, m.id, m.body_session, m.body_id, r.parts
        FROM removed r JOIN messages m ON m.tenant = r.tenant AND m.body_session = r.session_id AND m.body_id = r.id
        WHERE r.body_session IS NULL
        ORDER BY m.tenant, m.body_session, m.body_id, m.session_id, m.id),
    renamed AS (
        UPDATE messages m SET body_session = h.session_id, body_id = h.id
        FROM heir h
        WHERE m.tenant = h.tenant AND m.body_session = h.body_session AND m.body_id = h.body_id
            AND (m.session_id, m.id) <> (h.session_id, h.id)),
    copied AS (
        UPDATE messages m SET parts = h.parts, body_session = NULL, body_id = NULL, body_bytes = 0
        FROM heir h
        WHERE m.tenant = h.tenant AND m.session_id = h.session_id AND m.id = h.id
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

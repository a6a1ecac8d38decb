-- +goose Up
-- What each tenant stores in its log, counted by the database itself on
-- every insert and delete of a message (cascades included), so a quota
-- reads one row (engine/quotas.go). A message's bytes are those of its
-- stored parts, metadata, replaced ids and id (RowSize's measure). The
-- row is updated in the transaction that writes the messages: concurrent
-- writers of one tenant serialize on it, so the count is exact.
CREATE TABLE tenant_usage (
    tenant    text   PRIMARY KEY,
    log_bytes bigint NOT NULL DEFAULT 0
);

INSERT INTO tenant_usage (tenant, log_bytes)
SELECT tenant, sum(octet_length(parts) + octet_length(metadata) + octet_length(replaces) + octet_length(id))
FROM messages GROUP BY tenant;

-- +goose StatementBegin
CREATE FUNCTION tenant_usage_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tenant_usage AS u (tenant, log_bytes)
    SELECT tenant, sum(octet_length(parts) + octet_length(metadata) + octet_length(replaces) + octet_length(id))
    FROM added GROUP BY tenant ORDER BY tenant
    ON CONFLICT (tenant) DO UPDATE SET log_bytes = u.log_bytes + excluded.log_bytes;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION tenant_usage_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE tenant_usage u SET log_bytes = u.log_bytes - r.bytes
    FROM (SELECT tenant, sum(octet_length(parts) + octet_length(metadata) + octet_length(replaces) + octet_length(id)) AS bytes
          FROM removed GROUP BY tenant) r
    WHERE u.tenant = r.tenant;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER messages_added AFTER INSERT ON messages
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION tenant_usage_added();
CREATE TRIGGER messages_removed AFTER DELETE ON messages
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION tenant_usage_removed();

-- Generations of the active view: a rewrite (compaction, clear, revert)
-- writes its view as a new generation, invisibly (a revert in batches of
-- their own), and makes it the session's in one short write (view_gen);
-- the rows of older generations are swept afterwards in batches. Readers
-- read the session's generation only, so they never see half a rewrite.
ALTER TABLE sessions ADD COLUMN view_gen bigint NOT NULL DEFAULT 0;
ALTER TABLE view_entries ADD COLUMN gen bigint NOT NULL DEFAULT 0;
ALTER TABLE view_entries DROP CONSTRAINT view_entries_pkey, ADD PRIMARY KEY (tenant, session_id, gen, ord);

-- +goose Down
DELETE FROM view_entries v USING sessions s WHERE s.tenant = v.tenant AND s.id = v.session_id AND v.gen <> s.view_gen;
ALTER TABLE view_entries DROP CONSTRAINT view_entries_pkey, ADD PRIMARY KEY (tenant, session_id, ord);
ALTER TABLE view_entries DROP COLUMN gen;
ALTER TABLE sessions DROP COLUMN view_gen;
DROP TRIGGER messages_removed ON messages;
DROP TRIGGER messages_added ON messages;
DROP FUNCTION tenant_usage_removed();
DROP FUNCTION tenant_usage_added();
DROP TABLE tenant_usage;

-- +goose Up
-- What each tenant stores in its log, counted by the database itself on
-- every insert and delete of a message (cascades included), so a quota
-- reads one row (engine/quotas.go). A message's bytes are those of its
-- stored parts, metadata, replaced ids and id (RowSize's measure).
CREATE TABLE tenant_usage (
    tenant    TEXT    PRIMARY KEY,
    log_bytes INTEGER NOT NULL DEFAULT 0
);

INSERT INTO tenant_usage (tenant, log_bytes)
SELECT tenant, sum(octet_length(parts) + octet_length(metadata) + octet_length(replaces) + octet_length(id))
FROM messages GROUP BY tenant;

-- +goose StatementBegin
CREATE TRIGGER messages_added AFTER INSERT ON messages BEGIN
    INSERT INTO tenant_usage (tenant, log_bytes)
    VALUES (NEW.tenant, octet_length(NEW.parts) + octet_length(NEW.metadata) + octet_length(NEW.replaces) + octet_length(NEW.id))
    ON CONFLICT (tenant) DO UPDATE SET log_bytes = log_bytes + excluded.log_bytes;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER messages_removed AFTER DELETE ON messages BEGIN
    UPDATE tenant_usage
    SET log_bytes = log_bytes - (octet_length(OLD.parts) + octet_length(OLD.metadata) + octet_length(OLD.replaces) + octet_length(OLD.id))
    WHERE tenant = OLD.tenant;
END;
-- +goose StatementEnd

-- Generations of the active view: a rewrite (compaction, clear, revert)
-- writes its view as a new generation, invisibly (a revert in batches of
-- their own), and makes it the session's in one short write (view_gen);
-- the rows of older generations are swept afterwards in batches. Readers
-- read the session's generation only, so they never see half a rewrite.
ALTER TABLE sessions ADD COLUMN view_gen INTEGER NOT NULL DEFAULT 0;
CREATE TABLE view_entries_gen (
    tenant     TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    gen        INTEGER NOT NULL DEFAULT 0,
    ord        INTEGER NOT NULL,
    message_id TEXT    NOT NULL,
    PRIMARY KEY (tenant, session_id, gen, ord),
    FOREIGN KEY (tenant, session_id, message_id) REFERENCES messages (tenant, session_id, id) ON DELETE CASCADE
);
INSERT INTO view_entries_gen (tenant, session_id, gen, ord, message_id)
SELECT tenant, session_id, 0, ord, message_id FROM view_entries;
DROP TABLE view_entries;
ALTER TABLE view_entries_gen RENAME TO view_entries;

-- +goose Down
CREATE TABLE view_entries_ord (
    tenant     TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    ord        INTEGER NOT NULL,
    message_id TEXT    NOT NULL,
    PRIMARY KEY (tenant, session_id, ord),
    FOREIGN KEY (tenant, session_id, message_id) REFERENCES messages (tenant, session_id, id) ON DELETE CASCADE
);
INSERT INTO view_entries_ord (tenant, session_id, ord, message_id)
SELECT v.tenant, v.session_id, v.ord, v.message_id FROM view_entries v JOIN sessions s ON s.tenant = v.tenant AND s.id = v.session_id
WHERE v.gen = s.view_gen;
DROP TABLE view_entries;
ALTER TABLE view_entries_ord RENAME TO view_entries;
ALTER TABLE sessions DROP COLUMN view_gen;
DROP TRIGGER messages_removed;
DROP TRIGGER messages_added;
DROP TABLE tenant_usage;

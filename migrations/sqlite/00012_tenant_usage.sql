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

-- +goose Down
DROP TRIGGER messages_removed;
DROP TRIGGER messages_added;
DROP TABLE tenant_usage;

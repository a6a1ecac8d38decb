-- +goose Up
-- Fewer statements per gateway request on SQLite (docs/performance.md,
-- "SQLite statements per gateway request").
--
-- The open tool calls (result_position = 0) of each session, counted on
-- its row by triggers, so that a transaction that read the row knows a
-- session without any and skips their read (two statements a gateway
-- request). UpdateSession never writes the column; only these triggers do.
ALTER TABLE sessions ADD COLUMN open_calls INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET open_calls = (SELECT count(*) FROM tool_calls c
    WHERE c.tenant = sessions.tenant AND c.session_id = sessions.id AND c.result_position = 0);
-- +goose StatementBegin
CREATE TRIGGER open_calls_inserted AFTER INSERT ON tool_calls WHEN NEW.result_position = 0 BEGIN
    UPDATE sessions SET open_calls = open_calls + 1 WHERE tenant = NEW.tenant AND id = NEW.session_id;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER open_calls_deleted AFTER DELETE ON tool_calls WHEN OLD.result_position = 0 BEGIN
    UPDATE sessions SET open_calls = open_calls - 1 WHERE tenant = OLD.tenant AND id = OLD.session_id;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER open_calls_updated AFTER UPDATE ON tool_calls
WHEN (OLD.result_position = 0) <> (NEW.result_position = 0) OR OLD.tenant <> NEW.tenant OR OLD.session_id <> NEW.session_id BEGIN
    UPDATE sessions SET open_calls = open_calls - 1 WHERE OLD.result_position = 0 AND tenant = OLD.tenant AND id = OLD.session_id;
    UPDATE sessions SET open_calls = open_calls + 1 WHERE NEW.result_position = 0 AND tenant = NEW.tenant AND id = NEW.session_id;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER open_calls_updated;
DROP TRIGGER open_calls_deleted;
DROP TRIGGER open_calls_inserted;
ALTER TABLE sessions DROP COLUMN open_calls;

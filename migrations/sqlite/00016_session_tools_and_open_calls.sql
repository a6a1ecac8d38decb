-- +goose Up
-- Fewer pages and statements per gateway request on SQLite (docs/
-- performance.md, "SQLite statements per gateway request").
--
-- A session's tools, tens of KB of JSON with the real coding agents, in a
-- table of their own (docs/performance.md, "The session row's tools"):
-- SQLite rewrites a row whole, its overflow pages included, on any UPDATE,
-- and the session row is updated twice a gateway request while its tools
-- rarely change. Tools of 1 KB or more live here, written only when they
-- change; the session row's tools column is then '' (a stored tools text
-- is never empty). Shorter ones stay in the session row. A session's row
-- here goes with the session (ON DELETE CASCADE): no orphans.
CREATE TABLE session_tools (
    tenant     TEXT NOT NULL,
    session_id TEXT NOT NULL,
    tools      TEXT NOT NULL,
    PRIMARY KEY (tenant, session_id),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, id) ON DELETE CASCADE
);
INSERT INTO session_tools (tenant, session_id, tools)
SELECT tenant, id, tools FROM sessions WHERE length(CAST(tools AS BLOB)) >= 1024;
UPDATE sessions SET tools = '' WHERE length(CAST(tools AS BLOB)) >= 1024;

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
UPDATE sessions SET tools = coalesce((SELECT t.tools FROM session_tools t
    WHERE t.tenant = sessions.tenant AND t.session_id = sessions.id), '[]') WHERE tools = '';
DROP TABLE session_tools;

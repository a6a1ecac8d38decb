-- +goose Up
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

-- +goose Down
UPDATE sessions SET tools = coalesce((SELECT t.tools FROM session_tools t
    WHERE t.tenant = sessions.tenant AND t.session_id = sessions.id), '[]') WHERE tools = '';
DROP TABLE session_tools;

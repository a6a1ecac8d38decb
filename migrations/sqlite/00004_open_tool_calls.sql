-- +goose Up
-- Tool calls still waiting for a result: an append that moves the
-- conversation on records them as interrupted.
CREATE INDEX tool_calls_open ON tool_calls (tenant, session_id, position) WHERE result_position = 0;

-- +goose Down
DROP INDEX tool_calls_open;

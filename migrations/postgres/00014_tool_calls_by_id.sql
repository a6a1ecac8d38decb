-- +goose Up
-- Sessions by the tool calls their logs hold (store/calls.go): the gateway
-- finds the session of a client that compacted its own history without
-- naming its session by the calls it kept (gateway/unsignalled.go).
CREATE INDEX tool_calls_by_id ON tool_calls (tenant, call_id);

-- +goose Down
DROP INDEX tool_calls_by_id;

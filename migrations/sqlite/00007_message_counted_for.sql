-- +goose Up
-- What a message's stored token count was made for: a short stable key of
-- the encoding and the chat framing (see engine.countKey). NULL (rows from
-- before this migration, and messages stored without one) means "unknown":
-- the engine recounts such a message the first time it would rely on it
-- after a revert or expand, and stores the key then, so the old behaviour
-- (always recount) holds for them exactly once.
ALTER TABLE messages ADD COLUMN counted_for TEXT;

-- +goose Down
ALTER TABLE messages DROP COLUMN counted_for;

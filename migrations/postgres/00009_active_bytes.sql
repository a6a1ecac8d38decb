-- +goose Up
-- The size of a session's active view in bytes (the engine's estimate of
-- its messages' encoded size), kept beside active_tokens so that an append
-- can refuse to grow a view past CONTEXTD_MAX_VIEW_BYTES without reading
-- it. Sessions from before this migration start at 0 and are exact again
-- from their next compaction, clear or revert.
ALTER TABLE sessions ADD COLUMN active_bytes bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE sessions DROP COLUMN active_bytes;

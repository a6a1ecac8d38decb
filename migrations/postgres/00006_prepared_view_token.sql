-- +goose Up
-- The view_token the session's latest PrepareContext returned, so that
-- ReportUsage can name the view it reports on even after the active view
-- was rewritten (compaction, revert, clear) since.
ALTER TABLE prepared_views ADD COLUMN view_token text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE prepared_views DROP COLUMN view_token;

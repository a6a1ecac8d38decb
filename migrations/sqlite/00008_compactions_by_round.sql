-- +goose Up
-- A session's compactions are listed and paged in round order (the round is
-- taken under the session's lock; created_at is a replica's clock). A round
-- is unique within a session: the compaction id is cmp_<round>.
CREATE UNIQUE INDEX compactions_by_round ON compactions (tenant, session_id, round);

-- +goose Down
DROP INDEX compactions_by_round;

-- +goose Up
-- view_epoch counts active-view rewrites (compactions, reverts): an anchor is
-- valid only in the epoch it was taken in.
ALTER TABLE sessions ADD COLUMN view_epoch integer NOT NULL DEFAULT 0;
-- The provider's input tokens for the first anchor_count active messages,
-- and our local estimate of the same request then (0: no anchor).
ALTER TABLE sessions ADD COLUMN anchor_input bigint NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN anchor_local bigint NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN anchor_count bigint NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN anchor_epoch integer NOT NULL DEFAULT 0;

-- Learned provider/local token ratio per tenant and model (approximate encodings).
CREATE TABLE calibrations (
    tenant     text             NOT NULL,
    model      text             NOT NULL,
    ratio      double precision NOT NULL,
    samples    integer          NOT NULL,
    updated_at timestamptz      NOT NULL,
    PRIMARY KEY (tenant, model)
);

-- +goose Down
DROP TABLE calibrations;
ALTER TABLE sessions DROP COLUMN anchor_epoch;
ALTER TABLE sessions DROP COLUMN anchor_count;
ALTER TABLE sessions DROP COLUMN anchor_local;
ALTER TABLE sessions DROP COLUMN anchor_input;
ALTER TABLE sessions DROP COLUMN view_epoch;

-- +goose Up
-- Boot id of the satellite process that committed sites.last_sequence: a
-- reconnecting satellite may resume from that sequence only if it committed
-- it itself; otherwise it sends a snapshot (another process numbered the same
-- sequences).
ALTER TABLE sites ADD COLUMN last_batch_boot_id text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sites DROP COLUMN last_batch_boot_id;

-- +goose Up
-- snapshot_due is true from a link of a satellite process other than the
-- one that committed the site's last batch (sites.last_batch_boot_id) until
-- a group applies that link's final snapshot part (hub/store OpenLink,
-- grouprows.go). The hub holds the devices' conditions from before the
-- new process meanwhile, so the policy's evidence is not fresh
-- (docs/reference/policy.md "Fresh evidence"), whatever poll marks arrive.
ALTER TABLE sites ADD COLUMN snapshot_due boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE sites DROP COLUMN snapshot_due;

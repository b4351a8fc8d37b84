-- +goose Up

-- A pending action may also await fresh evidence from its site
-- (AwaitingFreshEvidence: the site's link ended, its last poll failed or had
-- listing hazards); the policy itself settles it once a fresh poll confirms
-- or clears the cause (docs/reference/policy.md "Fresh evidence").
ALTER TABLE policy_pending_actions DROP CONSTRAINT policy_pending_actions_reason_check;
ALTER TABLE policy_pending_actions ADD CONSTRAINT policy_pending_actions_reason_check
    CHECK (reason IN ('HeldByGuard', 'StaleTrigger', 'AwaitingFreshEvidence'));

-- When the hub received each site condition's newest observation (its
-- observed_time advanced), by the database's clock: the policy compares it
-- with the link's link_connected_at to tell a poll reported over the
-- current link from one reported before the link ended.
ALTER TABLE site_conditions ADD COLUMN received_at timestamptz;

-- +goose Down
ALTER TABLE site_conditions DROP COLUMN received_at;
ALTER TABLE policy_pending_actions DROP CONSTRAINT policy_pending_actions_reason_check;
ALTER TABLE policy_pending_actions ADD CONSTRAINT policy_pending_actions_reason_check
    CHECK (reason IN ('HeldByGuard', 'StaleTrigger'));

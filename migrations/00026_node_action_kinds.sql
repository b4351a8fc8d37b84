-- +goose Up

-- Node actions as operation kinds (docs/reference/operations.md "Node
-- actions"): power on, power off, reboot, set and clear maintenance and
-- reprovision join the kinds an operation may have.
ALTER TABLE operations DROP CONSTRAINT operations_kind_check;
ALTER TABLE operations ADD CONSTRAINT operations_kind_check
    CHECK (kind IN ('ENROL', 'INSPECT', 'CLEAN', 'PROVIDE', 'DEPLOY', 'UNDEPLOY', 'NOVA_CREATE', 'NOVA_DELETE',
                    'POWER_ON', 'POWER_OFF', 'REBOOT', 'SET_MAINTENANCE', 'CLEAR_MAINTENANCE', 'REPROVISION'));

-- +goose Down
DELETE FROM operations WHERE kind IN ('POWER_ON', 'POWER_OFF', 'REBOOT', 'SET_MAINTENANCE', 'CLEAR_MAINTENANCE', 'REPROVISION');
ALTER TABLE operations DROP CONSTRAINT operations_kind_check;
ALTER TABLE operations ADD CONSTRAINT operations_kind_check
    CHECK (kind IN ('ENROL', 'INSPECT', 'CLEAN', 'PROVIDE', 'DEPLOY', 'UNDEPLOY', 'NOVA_CREATE', 'NOVA_DELETE'));

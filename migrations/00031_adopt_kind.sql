-- +goose Up

-- ADOPT joins the operation kinds (docs/reference/operations.md "Adopt"):
-- Ironic's "adopt" verb for machines already running outside Ironic.
ALTER TABLE operations DROP CONSTRAINT operations_kind_check;
ALTER TABLE operations ADD CONSTRAINT operations_kind_check
    CHECK (kind IN ('ENROL', 'INSPECT', 'CLEAN', 'PROVIDE', 'DEPLOY', 'UNDEPLOY', 'NOVA_CREATE', 'NOVA_DELETE',
                    'POWER_ON', 'POWER_OFF', 'REBOOT', 'SET_MAINTENANCE', 'CLEAR_MAINTENANCE', 'REPROVISION', 'ADOPT'));

-- +goose Down
DELETE FROM operations WHERE kind = 'ADOPT';
ALTER TABLE operations DROP CONSTRAINT operations_kind_check;
ALTER TABLE operations ADD CONSTRAINT operations_kind_check
    CHECK (kind IN ('ENROL', 'INSPECT', 'CLEAN', 'PROVIDE', 'DEPLOY', 'UNDEPLOY', 'NOVA_CREATE', 'NOVA_DELETE',
                    'POWER_ON', 'POWER_OFF', 'REBOOT', 'SET_MAINTENANCE', 'CLEAR_MAINTENANCE', 'REPROVISION'));

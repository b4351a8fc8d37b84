-- +goose Up

-- Validation runs (docs/reference/hardware.md "Validation"): a device of
-- the validation pool is offered only after a run passes. A run is the
-- operation of kind VALIDATE (inspect, clean) plus what the hub checks
-- after it: the inspected hardware against its profile and the external
-- checks' results (validation_results). HARDWARE_REREAD and VALIDATE join
-- the operation kinds (ADOPT kept for the operations that add it).
ALTER TABLE operations DROP CONSTRAINT operations_kind_check;
ALTER TABLE operations ADD CONSTRAINT operations_kind_check
    CHECK (kind IN ('ENROL', 'INSPECT', 'CLEAN', 'PROVIDE', 'DEPLOY', 'UNDEPLOY', 'NOVA_CREATE', 'NOVA_DELETE',
                    'POWER_ON', 'POWER_OFF', 'REBOOT', 'SET_MAINTENANCE', 'CLEAR_MAINTENANCE', 'REPROVISION',
                    'ADOPT', 'HARDWARE_REREAD', 'VALIDATE'));

CREATE TABLE validation_runs (
    -- The VALIDATE operation's id.
    id               uuid        PRIMARY KEY REFERENCES operations (id),
    device_id        uuid        NOT NULL REFERENCES devices (id),
    site             text        NOT NULL REFERENCES sites (name),
    state            text        NOT NULL DEFAULT 'RUNNING'
        CHECK (state IN ('RUNNING', 'AWAITING_RESULTS', 'PASSED', 'FAILED')),
    -- External checks whose passing results the run waits for.
    required_checks  text[]      NOT NULL DEFAULT '{}',
    failing_checks   text[]      NOT NULL DEFAULT '{}',
    message          text        NOT NULL DEFAULT '',
    offer_command_id uuid,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    ended_at         timestamptz
);
CREATE INDEX validation_runs_device ON validation_runs (device_id, created_at DESC);
CREATE INDEX validation_runs_open ON validation_runs (state) WHERE state IN ('RUNNING', 'AWAITING_RESULTS');

-- +goose Down
DROP TABLE validation_runs;
DELETE FROM operations WHERE kind IN ('HARDWARE_REREAD', 'VALIDATE');

-- +goose Up

-- Typed command results (issue 10 item 5): whether a failed command can
-- succeed if it is sent again unchanged. 'TRANSIENT' is resent after the
-- capped backoff; 'PERMANENT' (node deleted, access rule missing, request
-- refused) waits for a newer desired state or an operator's RetryCommand;
-- '' is a failure the satellite did not classify (one older than the field)
-- and is treated as TRANSIENT, as every failure was before. failure_reason
-- is the satellite's CamelCase word for it ("NodeNotFound", ...).
ALTER TABLE commands
    ADD COLUMN failure_class  text NOT NULL DEFAULT ''
        CHECK (failure_class IN ('', 'TRANSIENT', 'PERMANENT')),
    ADD COLUMN failure_reason text NOT NULL DEFAULT '';

-- The same for the device's last_command_error.
ALTER TABLE devices
    ADD COLUMN last_command_failure_class  text NOT NULL DEFAULT ''
        CHECK (last_command_failure_class IN ('', 'TRANSIENT', 'PERMANENT')),
    ADD COLUMN last_command_failure_reason text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE devices
    DROP COLUMN last_command_failure_reason,
    DROP COLUMN last_command_failure_class;
ALTER TABLE commands
    DROP COLUMN failure_reason,
    DROP COLUMN failure_class;

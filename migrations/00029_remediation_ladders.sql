-- +goose Up

-- Remediation ladders (docs/reference/policy.md "Remediation ladders"):
-- the durable position of each device's ladder, advanced by the policy
-- evaluator that holds the advisory lock (hub/remediation). One ladder per
-- quarantine (the generation of the rule's hold), at most one open per
-- device.
CREATE TABLE remediation_ladders (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    device_id       uuid        NOT NULL REFERENCES devices (id),
    site            text        NOT NULL REFERENCES sites (name),
    rule            text        NOT NULL,
    -- The desired generation of the quarantine hold policy:<rule> the
    -- ladder remediates (its idempotency key).
    hold_generation bigint      NOT NULL,
    state           text        NOT NULL DEFAULT 'RUNNING'
        CHECK (state IN ('RUNNING', 'SUCCEEDED', 'HANDED_OFF', 'ABANDONED')),
    -- The current step, 0-based.
    position        integer     NOT NULL DEFAULT 0,
    steps_total     integer     NOT NULL,
    -- The step (1-based) that fixed the device; NULL unless SUCCEEDED.
    fixed_step      integer,
    fixed_kind      text        NOT NULL DEFAULT '',
    -- Why the ladder waits before its next step ('' when it does not):
    -- MaxInFlight, ExcludedFromAutomation, MaintenanceWindow, GuardTripped,
    -- SiteUnreachable, CustomerInstance, OperationActive.
    waiting         text        NOT NULL DEFAULT '',
    detail          text        NOT NULL DEFAULT '',
    -- The fault that started it.
    cause           text        NOT NULL DEFAULT '',
    released        boolean     NOT NULL DEFAULT false,
    started_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    ended_at        timestamptz,
    UNIQUE (device_id, hold_generation)
);
CREATE UNIQUE INDEX remediation_ladders_one_open ON remediation_ladders (device_id) WHERE state = 'RUNNING';
CREATE INDEX remediation_ladders_budget ON remediation_ladders (device_id, started_at);

-- The steps a ladder started. operation_id is chosen (and stored) before
-- the operation is created, so a pass that died between the two creates
-- that same operation, never a second one.
CREATE TABLE remediation_steps (
    ladder_id    bigint      NOT NULL REFERENCES remediation_ladders (id),
    step         integer     NOT NULL,
    kind         text        NOT NULL,
    operation_id uuid        NOT NULL UNIQUE,
    state        text        NOT NULL DEFAULT 'STARTING'
        CHECK (state IN ('STARTING', 'RUNNING', 'SETTLING', 'SUCCEEDED', 'FAILED', 'TIMED_OUT')),
    detail       text        NOT NULL DEFAULT '',
    started_at   timestamptz NOT NULL DEFAULT now(),
    -- Since when the device's conditions are good after the operation.
    good_since   timestamptz,
    ended_at     timestamptz,
    PRIMARY KEY (ladder_id, step)
);

-- +goose Down
DROP TABLE remediation_steps;
DROP TABLE remediation_ladders;

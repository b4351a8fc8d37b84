-- +goose Up

-- The quarantine policy's decision log (hub/policyrun): one row per
-- (device, kind, trigger): kind QUARANTINE is keyed by the status_history row
-- of the triggering status change, kind RELEASE by the desired generation of
-- the quarantine it releases. Dry-run decisions are logged alike
-- (dry_run = true) and change nothing else.
CREATE TABLE policy_decisions (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    device_id      uuid        NOT NULL REFERENCES devices (id),
    site           text        NOT NULL REFERENCES sites (name),
    kind           text        NOT NULL CHECK (kind IN ('QUARANTINE', 'RELEASE')),
    trigger_id     bigint      NOT NULL,
    action         text        NOT NULL CHECK (action IN ('QUARANTINE', 'PENDING', 'SKIP', 'RELEASE')),
    reason         text        NOT NULL,
    detail         text        NOT NULL DEFAULT '',
    rule           text        NOT NULL DEFAULT '',
    dry_run        boolean     NOT NULL DEFAULT false,
    from_status    text        NOT NULL DEFAULT '',
    to_status      text        NOT NULL DEFAULT '',
    cause_type     text        NOT NULL DEFAULT '',
    cause_reason   text        NOT NULL DEFAULT '',
    cause_message  text        NOT NULL DEFAULT '',
    cause_since    timestamptz,
    -- When the hub committed the triggering status change.
    triggered_at   timestamptz,
    -- Guard figures at decision time: automatic quarantines in the window
    -- before this one, and the denominator (devices not removed).
    window_count   integer     NOT NULL DEFAULT 0,
    site_devices   integer     NOT NULL DEFAULT 0,
    command_id     uuid        REFERENCES commands (id),
    replica        text        NOT NULL DEFAULT '',
    decided_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (device_id, kind, trigger_id)
);
CREATE INDEX policy_decisions_site ON policy_decisions (site, id DESC);
CREATE INDEX policy_decisions_guard ON policy_decisions (site, decided_at) WHERE action = 'QUARANTINE' AND kind = 'QUARANTINE';
CREATE INDEX policy_decisions_command ON policy_decisions (command_id) WHERE command_id IS NOT NULL;

-- Automatic quarantines that wait for an operator: held by the guard or
-- stale triggers (never acted on automatically).
CREATE TABLE policy_pending_actions (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    decision_id       bigint      NOT NULL UNIQUE REFERENCES policy_decisions (id),
    device_id         uuid        NOT NULL REFERENCES devices (id),
    site              text        NOT NULL REFERENCES sites (name),
    rule              text        NOT NULL,
    reason            text        NOT NULL CHECK (reason IN ('HeldByGuard', 'StaleTrigger')),
    detail            text        NOT NULL DEFAULT '',
    state             text        NOT NULL DEFAULT 'PENDING'
        CHECK (state IN ('PENDING', 'APPROVED', 'REJECTED', 'EXPIRED')),
    created_at        timestamptz NOT NULL DEFAULT now(),
    resolved_at       timestamptz,
    resolved_by       text        NOT NULL DEFAULT '',
    resolution_reason text        NOT NULL DEFAULT '',
    command_id        uuid        REFERENCES commands (id)
);
CREATE INDEX policy_pending_open ON policy_pending_actions (site, id) WHERE state = 'PENDING';

-- The blast-radius guard per site: tripped since when, by which rule.
CREATE TABLE policy_site_state (
    site                 text PRIMARY KEY REFERENCES sites (name),
    guard_tripped_since  timestamptz,
    guard_tripped_rule   text        NOT NULL DEFAULT '',
    guard_tripped_detail text        NOT NULL DEFAULT '',
    updated_at           timestamptz NOT NULL DEFAULT now()
);

-- Per-device "exclude from automation" (kind EXCLUSION: policy neither
-- quarantines nor releases it) and operator-declared planned maintenance
-- (kind PLANNED_MAINTENANCE: a MAINTENANCE trigger inside it is skipped).
-- The maintenance windows themselves are data of the policy file.
CREATE TABLE policy_device_holds (
    device_id   uuid        NOT NULL REFERENCES devices (id),
    kind        text        NOT NULL CHECK (kind IN ('EXCLUSION', 'PLANNED_MAINTENANCE')),
    reason      text        NOT NULL,
    author      text        NOT NULL,
    starts_at   timestamptz NOT NULL DEFAULT now(),
    ends_at     timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (device_id, kind)
);

-- +goose Down
DROP TABLE policy_device_holds;
DROP TABLE policy_site_state;
DROP TABLE policy_pending_actions;
DROP TABLE policy_decisions;

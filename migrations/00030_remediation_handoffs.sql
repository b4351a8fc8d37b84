-- +goose Up

-- Repair handoffs and the remediation change feed (docs/reference/policy.md
-- "Repair handoff"). A handoff holds its device quarantined for repair
-- (quarantine hold 'repair'); one per quarantine of a rule.
CREATE TABLE remediation_handoffs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    device_id        uuid        NOT NULL REFERENCES devices (id),
    site             text        NOT NULL REFERENCES sites (name),
    rule             text        NOT NULL,
    ladder_id        bigint      REFERENCES remediation_ladders (id),
    hold_generation  bigint      NOT NULL,
    reason           text        NOT NULL CHECK (reason IN ('LadderExhausted', 'BudgetSpent', 'RecommendedAction')),
    detail           text        NOT NULL DEFAULT '',
    state            text        NOT NULL DEFAULT 'OPEN' CHECK (state IN ('OPEN', 'CLOSED')),
    created_at       timestamptz NOT NULL DEFAULT now(),
    closed_at        timestamptz,
    closed_by        text        NOT NULL DEFAULT '',
    close_note       text        NOT NULL DEFAULT '',
    -- The outgoing webhook: PENDING until a 2xx answer (DELIVERED); NONE
    -- when no webhook is configured.
    webhook_state    text        NOT NULL DEFAULT 'PENDING' CHECK (webhook_state IN ('NONE', 'PENDING', 'DELIVERED')),
    webhook_attempts integer     NOT NULL DEFAULT 0,
    webhook_next_at  timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz,
    UNIQUE (device_id, hold_generation)
);
CREATE INDEX remediation_handoffs_due ON remediation_handoffs (webhook_next_at) WHERE webhook_state = 'PENDING';
CREATE UNIQUE INDEX remediation_handoffs_one_open ON remediation_handoffs (device_id) WHERE state = 'OPEN';

-- Every webhook attempt, with what the receiver answered.
CREATE TABLE remediation_webhook_attempts (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    handoff_id   bigint      NOT NULL REFERENCES remediation_handoffs (id),
    attempt      integer     NOT NULL,
    status_code  integer     NOT NULL DEFAULT 0,
    error        text        NOT NULL DEFAULT '',
    duration_ms  integer     NOT NULL DEFAULT 0,
    attempted_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX remediation_webhook_attempts_handoff ON remediation_webhook_attempts (handoff_id, id);

-- The remediation change feed: one row per ladder step and outcome, with
-- its writing transaction's id like the other feed sources
-- (migrations/00016).
CREATE TABLE remediation_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    xid         xid8        NOT NULL DEFAULT pg_current_xact_id(),
    device_id   uuid        NOT NULL REFERENCES devices (id),
    site        text        NOT NULL REFERENCES sites (name),
    rule        text        NOT NULL,
    ladder_id   bigint,
    handoff_id  bigint,
    -- LADDER_STARTED, STEP_STARTED, STEP_SUCCEEDED, STEP_FAILED,
    -- STEP_TIMED_OUT, WAITING, FIXED, RELEASED, ABANDONED, HANDED_OFF,
    -- HANDOFF_CLOSED.
    event       text        NOT NULL,
    step        integer     NOT NULL DEFAULT 0,
    kind        text        NOT NULL DEFAULT '',
    operation_id uuid,
    detail      text        NOT NULL DEFAULT '',
    recorded_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX remediation_events_feed ON remediation_events (xid, id);
CREATE INDEX remediation_events_device ON remediation_events (device_id, id DESC);

-- +goose StatementBegin
CREATE FUNCTION remediation_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ironlink_feed', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER remediation_events_feed AFTER INSERT ON remediation_events
    FOR EACH STATEMENT EXECUTE FUNCTION remediation_events_notify();

-- +goose Down
DROP TABLE remediation_events;
DROP FUNCTION remediation_events_notify();
DROP TABLE remediation_webhook_attempts;
DROP TABLE remediation_handoffs;

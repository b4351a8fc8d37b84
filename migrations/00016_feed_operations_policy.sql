-- +goose Up

-- More change feed sources (hub/store/feed.go, FleetService.WatchFleet):
-- operation state changes, policy decisions and pending action
-- resolutions, each row carrying its writing transaction's id (xid8) like
-- status_history and command_events (migrations/00013_change_feed.sql).

-- Operation state changes: one row per creation and per state change of an
-- operation, holding the operation's changing fields as they were then.
CREATE TABLE operation_events (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    xid             xid8        NOT NULL DEFAULT pg_current_xact_id(),
    operation_id    uuid        NOT NULL REFERENCES operations (id) ON DELETE CASCADE,
    state           text        NOT NULL,
    -- '' when the operation was just created.
    previous_state  text        NOT NULL DEFAULT '',
    device_id       uuid,
    attempts        integer     NOT NULL,
    last_error      text        NOT NULL,
    failure_reason  text        NOT NULL,
    provision_state text        NOT NULL,
    server_id       text        NOT NULL,
    updated_at      timestamptz NOT NULL,
    started_at      timestamptz,
    ended_at        timestamptz,
    recorded_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX operation_events_feed ON operation_events (xid, id);

-- +goose StatementBegin
CREATE FUNCTION operation_events_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO operation_events (operation_id, state, previous_state, device_id, attempts, last_error,
        failure_reason, provision_state, server_id, updated_at, started_at, ended_at)
    VALUES (NEW.id, NEW.state, CASE WHEN TG_OP = 'UPDATE' THEN OLD.state ELSE '' END, NEW.device_id, NEW.attempts,
        NEW.last_error, NEW.failure_reason, NEW.provision_state, NEW.server_id, NEW.updated_at, NEW.started_at,
        NEW.ended_at);
    -- A hint for watchers (hub/store FeedNotifyChannel); delivered at commit.
    PERFORM pg_notify('ironlink_feed', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER operations_feed_insert AFTER INSERT ON operations
    FOR EACH ROW EXECUTE FUNCTION operation_events_record();
CREATE TRIGGER operations_feed_update AFTER UPDATE OF state ON operations
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION operation_events_record();

-- Policy decisions are only inserted (the command id is set later in the
-- same transaction): the column default is enough. Rows logged before this
-- migration keep NULL and are not in the feed.
ALTER TABLE policy_decisions ADD COLUMN xid xid8;
ALTER TABLE policy_decisions ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
CREATE INDEX policy_decisions_feed ON policy_decisions (xid, id) WHERE xid IS NOT NULL;

-- +goose StatementBegin
CREATE FUNCTION policy_decisions_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ironlink_feed', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER policy_decisions_feed AFTER INSERT ON policy_decisions
    FOR EACH STATEMENT EXECUTE FUNCTION policy_decisions_notify();

-- Pending action resolutions (approved, rejected, expired): one row per
-- state change. Their creation is the PENDING decision's event.
CREATE TABLE policy_pending_events (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    xid               xid8        NOT NULL DEFAULT pg_current_xact_id(),
    pending_id        bigint      NOT NULL REFERENCES policy_pending_actions (id) ON DELETE CASCADE,
    state             text        NOT NULL,
    previous_state    text        NOT NULL,
    resolved_at       timestamptz,
    resolved_by       text        NOT NULL,
    resolution_reason text        NOT NULL,
    command_id        uuid,
    recorded_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX policy_pending_events_feed ON policy_pending_events (xid, id);

-- +goose StatementBegin
CREATE FUNCTION policy_pending_events_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO policy_pending_events (pending_id, state, previous_state, resolved_at, resolved_by,
        resolution_reason, command_id)
    VALUES (NEW.id, NEW.state, OLD.state, NEW.resolved_at, NEW.resolved_by, NEW.resolution_reason, NEW.command_id);
    PERFORM pg_notify('ironlink_feed', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER policy_pending_feed_update AFTER UPDATE OF state ON policy_pending_actions
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION policy_pending_events_record();

-- +goose Down
DROP TRIGGER policy_pending_feed_update ON policy_pending_actions;
DROP FUNCTION policy_pending_events_record();
DROP TABLE policy_pending_events;
DROP TRIGGER policy_decisions_feed ON policy_decisions;
DROP FUNCTION policy_decisions_notify();
DROP INDEX policy_decisions_feed;
ALTER TABLE policy_decisions DROP COLUMN xid;
DROP TRIGGER operations_feed_update ON operations;
DROP TRIGGER operations_feed_insert ON operations;
DROP FUNCTION operation_events_record();
DROP TABLE operation_events;

-- +goose Up

-- The change feed (hub/store/feed.go, FleetService.WatchFleet) orders every
-- source row by the id of the transaction that wrote it (xid8, never wraps)
-- and reads only rows of transactions older than the oldest one still
-- running, so a row is never read before every row that sorts before it
-- has committed (a bigserial would let a later id commit first).

-- Status changes: the column default is the only cost on the ingest path.
-- Rows written before this migration keep NULL and are not in the feed
-- (the default is set separately so adding the column rewrites nothing).
-- On a partitioned status_history both statements recurse to the
-- partitions, and the index is a partitioned index.
ALTER TABLE status_history ADD COLUMN xid xid8;
ALTER TABLE status_history ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
CREATE INDEX status_history_feed ON status_history (xid, id) WHERE xid IS NOT NULL;

-- Command state changes: one row per creation, state change or resend of a
-- command, holding the command's changing fields as they were then.
CREATE TABLE command_events (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    xid            xid8        NOT NULL DEFAULT pg_current_xact_id(),
    command_id     uuid        NOT NULL REFERENCES commands (id),
    state          text        NOT NULL,
    -- '' when the command was just created.
    previous_state text        NOT NULL DEFAULT '',
    attempts       integer     NOT NULL,
    last_error     text        NOT NULL,
    result_detail  text        NOT NULL,
    failure_class  text        NOT NULL,
    failure_reason text        NOT NULL,
    updated_at     timestamptz NOT NULL,
    completed_at   timestamptz,
    recorded_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX command_events_feed ON command_events (xid, id);

-- +goose StatementBegin
CREATE FUNCTION command_events_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO command_events (command_id, state, previous_state, attempts, last_error, result_detail,
        failure_class, failure_reason, updated_at, completed_at)
    VALUES (NEW.id, NEW.state, CASE WHEN TG_OP = 'UPDATE' THEN OLD.state ELSE '' END, NEW.attempts,
        NEW.last_error, NEW.result_detail, NEW.failure_class, NEW.failure_reason, NEW.updated_at, NEW.completed_at);
    -- A hint for watchers (hub/store FeedNotifyChannel); delivered at commit.
    PERFORM pg_notify('ironlink_feed', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER commands_feed_insert AFTER INSERT ON commands
    FOR EACH ROW EXECUTE FUNCTION command_events_record();
CREATE TRIGGER commands_feed_update AFTER UPDATE OF state, attempts ON commands
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.attempts IS DISTINCT FROM NEW.attempts)
    EXECUTE FUNCTION command_events_record();

-- +goose Down
DROP TRIGGER commands_feed_update ON commands;
DROP TRIGGER commands_feed_insert ON commands;
DROP FUNCTION command_events_record();
DROP TABLE command_events;
DROP INDEX status_history_feed;
ALTER TABLE status_history DROP COLUMN xid;

-- +goose Up

-- Issue 26 item 1: a command's delivery and its result no longer take
-- PostgreSQL's NOTIFY lock (docs/design/performance.md "Quarantine under
-- ingest, fourth step"). A transaction that notified holds that one
-- database-wide lock from its commit until its commit record is flushed,
-- so notifying transactions commit one after another; every command state
-- change notified the change feed from this trigger, three notifying
-- commits per quarantine (created, SENT, SUCCEEDED). The delivery
-- (store.MarkSent) and the result (store.RecordResult) now set
-- ironlink.feed_notify to 'deferred' for their own transaction, and the
-- hub sends the feed hint itself after their commit, outside it and
-- without waiting for its flush (hub/store/policyhint.go), as migration
-- 00054 does for condition groups. Every other writer still notifies here.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION command_events_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO command_events (command_id, state, previous_state, attempts, last_error, result_detail,
        failure_class, failure_reason, updated_at, completed_at)
    VALUES (NEW.id, NEW.state, CASE WHEN TG_OP = 'UPDATE' THEN OLD.state ELSE '' END, NEW.attempts,
        NEW.last_error, NEW.result_detail, NEW.failure_class, NEW.failure_reason, NEW.updated_at, NEW.completed_at);
    -- A hint for watchers (hub/store FeedNotifyChannel); delivered at commit.
    IF current_setting('ironlink.feed_notify', true) IS DISTINCT FROM 'deferred' THEN
        PERFORM pg_notify('ironlink_feed', '');
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION command_events_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO command_events (command_id, state, previous_state, attempts, last_error, result_detail,
        failure_class, failure_reason, updated_at, completed_at)
    VALUES (NEW.id, NEW.state, CASE WHEN TG_OP = 'UPDATE' THEN OLD.state ELSE '' END, NEW.attempts,
        NEW.last_error, NEW.result_detail, NEW.failure_class, NEW.failure_reason, NEW.updated_at, NEW.completed_at);
    PERFORM pg_notify('ironlink_feed', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd

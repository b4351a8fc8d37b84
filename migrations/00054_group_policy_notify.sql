-- +goose Up
-- Issue 26 item 1: condition ingest no longer takes PostgreSQL's NOTIFY lock.
-- Every transaction that called pg_notify takes one database-wide lock at
-- commit and holds it until its commit record is flushed, so notifying
-- transactions commit one after another. The trigger of migration 00044
-- made almost every ingest group notify (a batch that turns a device
-- FAULTED), so the groups' commits queued behind each other and behind
-- every command write (whose change-feed trigger notifies too), holding
-- their device-row locks meanwhile.
--
-- A group commit (hub/store/group.go) now sets ironlink.policy_notify to
-- 'deferred' for its own transaction; the trigger's WHEN clause then skips
-- it, and the hub sends the hint itself after the commit, outside the
-- group's transaction and without waiting for its flush
-- (hub/store/policyhint.go). Every other writer of status_history (health
-- reports, quarantine, release, stale sweeps) still notifies from the
-- trigger.
DROP TRIGGER status_history_policy_notify ON status_history;
CREATE TRIGGER status_history_policy_notify AFTER INSERT ON status_history
    FOR EACH ROW WHEN (NEW.status IN ('FAULTED', 'MAINTENANCE')
        AND current_setting('ironlink.policy_notify', true) IS DISTINCT FROM 'deferred')
    EXECUTE FUNCTION status_history_policy_notify();

-- +goose Down
DROP TRIGGER status_history_policy_notify ON status_history;
CREATE TRIGGER status_history_policy_notify AFTER INSERT ON status_history
    FOR EACH ROW WHEN (NEW.status IN ('FAULTED', 'MAINTENANCE'))
    EXECUTE FUNCTION status_history_policy_notify();

-- +goose Up
-- Issue 22: the policy evaluator wakes as soon as a device enters FAULTED
-- or MAINTENANCE instead of waiting for its next --policy-interval pass.
-- A row trigger on status_history (cloned onto every partition) sends a
-- hint on ironlink_policy (hub/store PolicyNotifyChannel) for those rows
-- only; its WHEN clause is evaluated without calling the function, so the
-- other transitions (and ingest without new faults) send nothing. The
-- payload is empty: PostgreSQL folds the identical notifications of one
-- transaction (a burst of faults committed together) into one.

-- +goose StatementBegin
CREATE FUNCTION status_history_policy_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ironlink_policy', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER status_history_policy_notify AFTER INSERT ON status_history
    FOR EACH ROW WHEN (NEW.status IN ('FAULTED', 'MAINTENANCE'))
    EXECUTE FUNCTION status_history_policy_notify();

-- +goose Down
DROP TRIGGER status_history_policy_notify ON status_history;
DROP FUNCTION status_history_policy_notify();

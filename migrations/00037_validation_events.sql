-- +goose Up

-- The change feed's validation source (hub/store/feed/validation.go):
-- every validation run's start, each check result recorded (the hub's
-- "hardware-profile" included) and its verdict (PASSED, FAILED), written
-- in the transaction that makes the change.
CREATE TABLE validation_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    xid         xid8        NOT NULL DEFAULT pg_current_xact_id(),
    run_id      uuid        NOT NULL REFERENCES validation_runs (id),
    device_id   uuid        NOT NULL REFERENCES devices (id),
    site        text        NOT NULL REFERENCES sites (name),
    -- STARTED, RESULT, PASSED, FAILED.
    event       text        NOT NULL CHECK (event IN ('STARTED', 'RESULT', 'PASSED', 'FAILED')),
    -- For RESULT: the check's name and PASS or FAIL.
    check_name  text        NOT NULL DEFAULT '',
    result      text        NOT NULL DEFAULT '',
    -- The run's message (PASSED, FAILED), the output excerpt (RESULT).
    detail      text        NOT NULL DEFAULT '',
    recorded_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX validation_events_feed ON validation_events (xid, id);

-- +goose StatementBegin
CREATE FUNCTION validation_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ironlink_feed', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER validation_events_feed AFTER INSERT ON validation_events
    FOR EACH STATEMENT EXECUTE FUNCTION validation_events_notify();

-- +goose Down
DROP TABLE validation_events;
DROP FUNCTION validation_events_notify();

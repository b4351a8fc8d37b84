-- +goose Up

-- Health conditions (docs/reference/conditions.md "Health conditions"):
-- rows of device_conditions and condition_history whose type is
-- "health.<componentClass>/<checkName>" carry the last event's details
-- (agent, fatal, error codes, impacted entities, recommended action,
-- processing strategy, generated and expire times, event id, metadata) as
-- JSON in health; NULL on the seven fixed conditions. expire_at is when a
-- health condition turns Unknown/Stale without a new report (the hub's
-- health sweep); NULL on the fixed ones.
ALTER TABLE device_conditions ADD COLUMN health jsonb, ADD COLUMN expire_at timestamptz;
ALTER TABLE condition_history ADD COLUMN health jsonb;

-- The sweep's look-up: health conditions not yet Unknown, by expiry.
CREATE INDEX device_conditions_health_expiry ON device_conditions (expire_at)
    WHERE expire_at IS NOT NULL AND status <> 'Unknown';
-- Warnings and faults per device (site summaries, the warning filter).
CREATE INDEX device_conditions_health_false ON device_conditions (device_id)
    WHERE health IS NOT NULL AND status = 'False';

-- Every health event id a site reported (sent by the checker or derived
-- from the event's content): an id seen again changes nothing, so a retried
-- batch is a no-op. Rows older than the sweep's retention are dropped.
CREATE TABLE health_event_ids (
    site        text        NOT NULL,
    event_id    text        NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (site, event_id)
);
CREATE INDEX health_event_ids_recorded ON health_event_ids (recorded_at);

-- +goose Down
DROP TABLE health_event_ids;
DROP INDEX device_conditions_health_false;
DROP INDEX device_conditions_health_expiry;
ALTER TABLE condition_history DROP COLUMN health;
ALTER TABLE device_conditions DROP COLUMN health, DROP COLUMN expire_at;

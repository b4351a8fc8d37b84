-- +goose Up

-- Issue 11 item 5: condition_history and status_history grow for years, so
-- they become range-partitioned by the hub's time of recording
-- (condition_history.recorded_at, status_history.changed_at). Columns, their
-- defaults and what the code inserts are unchanged; the primary keys now
-- include the partition key, as PostgreSQL requires.
--
-- Partitions (see hub/store/partitions.go, which keeps them):
--   <table>_legacy   FROM (MINVALUE) TO (next Monday 00:00 UTC): every row
--                    recorded before this migration, and this week's;
--   <table>_pYYYYMMDD one per interval (a week by default), created ahead
--                    by the hub's partition task by splitting the tail;
--   <table>_tail     FROM (last bound) TO (MAXVALUE): catches any row past
--                    the partitions created ahead, so an insert never fails.
-- Together they cover every timestamp, so no DEFAULT partition is needed —
-- and none is wanted: a DEFAULT partition would stop PostgreSQL from
-- scanning the partitions in time order (ordered Append), which is what
-- lets "newest first, LIMIT n" and "latest at or before T" read only the
-- newest partitions. Retention drops whole partitions whose upper bound is
-- older than the retention; the tail is never dropped.
--
-- Indexes: (device_id, <time>, id) on each table serves GetDevice's
-- histories (newest first per device), the as_of look-ups ("latest row at or
-- before T per device") and, with the partition key leading the ORDER BY,
-- ordered Append across partitions.

ALTER TABLE condition_history RENAME TO condition_history_old;
ALTER TABLE condition_history_old RENAME CONSTRAINT condition_history_pkey TO condition_history_old_pkey;
ALTER INDEX condition_history_device RENAME TO condition_history_old_device;
ALTER TABLE status_history RENAME TO status_history_old;
ALTER TABLE status_history_old RENAME CONSTRAINT status_history_pkey TO status_history_old_pkey;
ALTER INDEX status_history_device RENAME TO status_history_old_device;

-- The new tables copy the old ones' columns with their defaults, identity
-- and CHECK constraints (LIKE), so a column another migration added before
-- this one is kept; the foreign key to devices is added explicitly.

-- Append-only: every change of a condition's status, reason or message.
CREATE TABLE condition_history (
    LIKE condition_history_old INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING CONSTRAINTS INCLUDING GENERATED,
    PRIMARY KEY (id, recorded_at),
    FOREIGN KEY (device_id) REFERENCES devices (id)
) PARTITION BY RANGE (recorded_at);
CREATE INDEX condition_history_device ON condition_history (device_id, recorded_at, id);

-- Append-only: every operational_status change.
CREATE TABLE status_history (
    LIKE status_history_old INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING CONSTRAINTS INCLUDING GENERATED,
    PRIMARY KEY (id, changed_at),
    FOREIGN KEY (device_id) REFERENCES devices (id)
) PARTITION BY RANGE (changed_at);
CREATE INDEX status_history_device ON status_history (device_id, changed_at, id);

-- +goose StatementBegin
DO $$
DECLARE
    bound timestamptz := (date_trunc('week', now() AT TIME ZONE 'UTC') + interval '7 days') AT TIME ZONE 'UTC';
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['condition_history', 'status_history'] LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (MINVALUE) TO (%L)', t || '_legacy', t, bound);
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (MAXVALUE)', t || '_tail', t, bound);
    END LOOP;
END
$$;
-- +goose StatementEnd

INSERT INTO condition_history OVERRIDING SYSTEM VALUE SELECT * FROM condition_history_old;
INSERT INTO status_history OVERRIDING SYSTEM VALUE SELECT * FROM status_history_old;
SELECT setval(pg_get_serial_sequence('condition_history', 'id'), COALESCE((SELECT max(id) FROM condition_history_old), 0) + 1, false);
SELECT setval(pg_get_serial_sequence('status_history', 'id'), COALESCE((SELECT max(id) FROM status_history_old), 0) + 1, false);
DROP TABLE condition_history_old;
DROP TABLE status_history_old;

-- ListSites counts each site's live devices and those with an orphaned
-- instance; without these indexes that read every device row, facts
-- included (~30 ms at 10,000 devices, more with JIT). Both are partial
-- indexes read index-only: devices_site_live holds the live devices,
-- devices_instance_mismatch exactly those with an orphaned instance (the
-- predicate is store.hasMismatch's, character for character).
CREATE INDEX devices_site_live ON devices (site) WHERE NOT removed;
CREATE INDEX devices_instance_mismatch ON devices (site)
    WHERE NOT removed AND (CASE WHEN jsonb_typeof(facts->'instance_mismatches') = 'array'
        THEN jsonb_array_length(facts->'instance_mismatches') > 0 ELSE false END);

-- +goose Down
DROP INDEX devices_instance_mismatch;
DROP INDEX devices_site_live;
ALTER TABLE condition_history RENAME TO condition_history_part;
ALTER TABLE status_history RENAME TO status_history_part;
ALTER INDEX condition_history_device RENAME TO condition_history_part_device;
ALTER INDEX status_history_device RENAME TO status_history_part_device;
CREATE TABLE condition_history (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    device_id            uuid        NOT NULL REFERENCES devices (id),
    type                 text        NOT NULL,
    status               text        NOT NULL,
    reason               text        NOT NULL,
    message              text        NOT NULL DEFAULT '',
    last_transition_time timestamptz NOT NULL,
    observed_time        timestamptz NOT NULL,
    recorded_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX condition_history_device ON condition_history (device_id, id);
CREATE TABLE status_history (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    device_id   uuid        NOT NULL REFERENCES devices (id),
    status      text        NOT NULL,
    reason      text        NOT NULL,
    changed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX status_history_device ON status_history (device_id, id);
INSERT INTO condition_history (id, device_id, type, status, reason, message, last_transition_time, observed_time, recorded_at)
    OVERRIDING SYSTEM VALUE
    SELECT id, device_id, type, status, reason, message, last_transition_time, observed_time, recorded_at
    FROM condition_history_part;
INSERT INTO status_history (id, device_id, status, reason, changed_at)
    OVERRIDING SYSTEM VALUE
    SELECT id, device_id, status, reason, changed_at FROM status_history_part;
SELECT setval(pg_get_serial_sequence('condition_history', 'id'), COALESCE((SELECT max(id) FROM condition_history_part), 0) + 1, false);
SELECT setval(pg_get_serial_sequence('status_history', 'id'), COALESCE((SELECT max(id) FROM status_history_part), 0) + 1, false);
DROP TABLE condition_history_part;
DROP TABLE status_history_part;

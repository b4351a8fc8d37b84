-- +goose Up

-- device_conditions loses its foreign key to devices, as the history
-- tables did in 00071 (issue 26; docs/design/performance.md "The foreign
-- key of device_conditions"). The one statement that writes it (hub/store
-- groupsql.go groupUpsertConditions) runs in a condition group and in
-- writeHealth (health reports and their expiry), each for devices it has
-- read or inserted in the same transaction under its site's lock (a
-- device inserted meanwhile by another site's group fails the group
-- whole, errDeviceRace, and it is retried); no device row is ever deleted
-- (a removed device keeps its row, removed = true). So the key could not
-- fail. Its check cost every new condition row a query on devices and a
-- FOR KEY SHARE lock on the device row; and the check's plan, cached per
-- connection, is a sequential scan when it is made while devices is
-- small: the raw ceiling of test/bench BenchmarkLinks1000 (286 devices)
-- ran 2,002 sequential scans of devices for its condition inserts, none
-- without the key, and in two runs of eleven the hub's first snapshots of
-- 1,000 sites (20,000 devices) stalled for over a minute on condition
-- upserts of 140 rows each busy 0.5-3 s on the CPU, waiting on nothing.
-- +goose StatementBegin
DO $$
DECLARE
    k record;
BEGIN
    FOR k IN
        SELECT c.conname FROM pg_constraint c
        WHERE c.contype = 'f' AND c.conrelid = 'device_conditions'::regclass AND c.confrelid = 'devices'::regclass
    LOOP
        EXECUTE format('ALTER TABLE device_conditions DROP CONSTRAINT %I', k.conname);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE device_conditions ADD CONSTRAINT device_conditions_device_id_fkey
    FOREIGN KEY (device_id) REFERENCES devices (id);

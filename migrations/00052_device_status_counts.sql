-- +goose Up

-- Issue 26 item 4: the site summary (ListSites), the fleet view's overview
-- and site pages counted every live device per site and status on each
-- read: at 1,000,000 devices 0.3-1 s a read (docs/design/performance.md
-- "Reads at a million devices"). device_status_counts keeps those counts
-- as they change, in the same transaction as the device rows (exact, as a
-- count(*) would be).
--
-- The table holds deltas, append-only: a writer only INSERTs (+1 for the
-- new (site, status) of a live device, -1 for the old one), so concurrent
-- writers never wait for each other or deadlock on a counter row. A
-- reader sums per (site, status); device_status_counts_fold() replaces the
-- rows it sees by one row per key (the store calls it when a read summed
-- many rows), in one statement, so a reader sees either the rows or their
-- sum. A row a concurrent fold deleted first is skipped by the other.
CREATE TABLE device_status_counts (
    site   text   NOT NULL,
    status text   NOT NULL,
    n      bigint NOT NULL
);
CREATE INDEX device_status_counts_key ON device_status_counts (site, status);

-- Inserts and deletes: one statement-level trigger over the transition
-- table (a snapshot of 100,000 devices costs one aggregate, not 100,000
-- trigger calls).
-- +goose StatementBegin
CREATE FUNCTION device_status_counts_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO device_status_counts (site, status, n)
    SELECT site, status, count(*) FROM new_devices WHERE NOT removed GROUP BY site, status;
    RETURN NULL;
END
$$;
CREATE FUNCTION device_status_counts_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO device_status_counts (site, status, n)
    SELECT site, status, -count(*) FROM old_devices WHERE NOT removed GROUP BY site, status;
    RETURN NULL;
END
$$;
-- Updates: a row trigger that fires only when the site, status or removed
-- flag changed (the WHEN clause is checked without calling the function,
-- so an ingest update that changes neither costs nothing more).
CREATE FUNCTION device_status_counts_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT OLD.removed THEN
        INSERT INTO device_status_counts (site, status, n) VALUES (OLD.site, OLD.status, -1);
    END IF;
    IF NOT NEW.removed THEN
        INSERT INTO device_status_counts (site, status, n) VALUES (NEW.site, NEW.status, 1);
    END IF;
    RETURN NULL;
END
$$;
CREATE FUNCTION device_status_counts_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM device_status_counts;
    RETURN NULL;
END
$$;
CREATE FUNCTION device_status_counts_fold() RETURNS void LANGUAGE sql AS $$
    WITH gone AS (DELETE FROM device_status_counts RETURNING site, status, n)
    INSERT INTO device_status_counts (site, status, n)
    SELECT site, status, sum(n) FROM gone GROUP BY site, status HAVING sum(n) <> 0
$$;
-- +goose StatementEnd
CREATE TRIGGER devices_status_counts_insert AFTER INSERT ON devices
    REFERENCING NEW TABLE AS new_devices FOR EACH STATEMENT EXECUTE FUNCTION device_status_counts_insert();
CREATE TRIGGER devices_status_counts_delete AFTER DELETE ON devices
    REFERENCING OLD TABLE AS old_devices FOR EACH STATEMENT EXECUTE FUNCTION device_status_counts_delete();
CREATE TRIGGER devices_status_counts_update AFTER UPDATE OF site, status, removed ON devices FOR EACH ROW
    WHEN (OLD.site IS DISTINCT FROM NEW.site OR OLD.status IS DISTINCT FROM NEW.status OR OLD.removed IS DISTINCT FROM NEW.removed)
    EXECUTE FUNCTION device_status_counts_update();
CREATE TRIGGER devices_status_counts_truncate AFTER TRUNCATE ON devices
    FOR EACH STATEMENT EXECUTE FUNCTION device_status_counts_truncate();

-- The counts of the devices already there (a lock keeps writers out
-- until the triggers and this sum are committed together).
LOCK TABLE devices IN SHARE MODE;
INSERT INTO device_status_counts (site, status, n)
SELECT site, status, count(*) FROM devices WHERE NOT removed GROUP BY site, status;

-- +goose Down
DROP TRIGGER devices_status_counts_truncate ON devices;
DROP TRIGGER devices_status_counts_update ON devices;
DROP TRIGGER devices_status_counts_delete ON devices;
DROP TRIGGER devices_status_counts_insert ON devices;
DROP FUNCTION device_status_counts_fold();
DROP FUNCTION device_status_counts_truncate();
DROP FUNCTION device_status_counts_update();
DROP FUNCTION device_status_counts_delete();
DROP FUNCTION device_status_counts_insert();
DROP TABLE device_status_counts;

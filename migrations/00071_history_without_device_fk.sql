-- +goose Up

-- The two append-only history tables lose their foreign key to devices
-- (issue 26 item 2; docs/design/performance.md "Quarantine under ingest,
-- fourth step"). Every row is written by a condition group or a
-- desired-state write for a device it has just read or inserted in the
-- same transaction, and no device row is ever deleted (a removed device
-- keeps its row, removed = true), so the key could not fail. Its check
-- cost every history row a query on devices and a FOR KEY SHARE row lock
-- on the device, written to the WAL and held until the group committed,
-- on the rows every quarantine and every group updates; and on a freshly
-- filled devices table the check's cached plan was a sequential scan per
-- history row (47,618,836 device rows read in 25 s of test/bench
-- BenchmarkLink, ingest 1,300-2,800 deltas/s against 5,400-7,400 once
-- autovacuum had analyzed the table).
-- Every foreign key from either table (or one of its partitions, unless
-- inherited from the table: those go with it) to devices is dropped,
-- whatever its name.
-- +goose StatementBegin
DO $$
DECLARE
    k record;
BEGIN
    FOR k IN
        SELECT c.conrelid::regclass AS tbl, c.conname
        FROM pg_constraint c
        WHERE c.contype = 'f' AND c.confrelid = 'devices'::regclass AND c.conparentid = 0
          AND (c.conrelid IN ('condition_history'::regclass, 'status_history'::regclass)
               OR c.conrelid IN (SELECT inhrelid FROM pg_inherits
                                 WHERE inhparent IN ('condition_history'::regclass, 'status_history'::regclass)))
    LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', k.tbl, k.conname);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE condition_history ADD CONSTRAINT condition_history_device_id_fkey1
    FOREIGN KEY (device_id) REFERENCES devices (id);
ALTER TABLE status_history ADD CONSTRAINT status_history_device_id_fkey1
    FOREIGN KEY (device_id) REFERENCES devices (id);

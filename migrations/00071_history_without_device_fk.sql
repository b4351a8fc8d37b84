-- +goose Up

-- The two append-only history tables lose their foreign key to devices
-- (issue 26 item 2; docs/design/performance.md "Fewer writes per delta:
-- the history tables' foreign keys"). Every row is written by a condition
-- group or a desired-state write for a device it has just read or inserted
-- in the same transaction, and no device row is ever deleted (a removed
-- device keeps its row, removed = true), so the key could not fail. Its
-- check cost every history row a query on devices and a FOR KEY SHARE row
-- lock on the device, written to the WAL and held until the group
-- committed, on the rows every quarantine and every group updates; and on
-- a freshly filled devices table the check's cached plan was a sequential
-- scan per history row (47,618,836 device rows read in 25 s of
-- test/bench BenchmarkLink, ingest 1,300-2,800 deltas/s against
-- 5,400-7,400 once autovacuum had analyzed the table).
-- Dropping the parent's constraint drops its partitions' copies.
ALTER TABLE condition_history DROP CONSTRAINT IF EXISTS condition_history_device_id_fkey1;
ALTER TABLE status_history DROP CONSTRAINT IF EXISTS status_history_device_id_fkey1;

-- +goose Down
ALTER TABLE condition_history ADD CONSTRAINT condition_history_device_id_fkey1
    FOREIGN KEY (device_id) REFERENCES devices (id);
ALTER TABLE status_history ADD CONSTRAINT status_history_device_id_fkey1
    FOREIGN KEY (device_id) REFERENCES devices (id);

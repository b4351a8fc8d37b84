-- +goose Up

-- Room on every devices page for the next version of its rows (issue 26
-- item 2; docs/design/performance.md "Fewer writes per delta"). A
-- condition group moves a device's observed_at with every delta; with
-- full pages (the default fillfactor 100) that new row version went to
-- another page, so PostgreSQL added it to each of the table's ten
-- indexes. With free room on the page an update that changes no indexed
-- column (observed_at alone) is a heap-only tuple (HOT) update: no index
-- entry. Applies to pages written from now on; a VACUUM FULL or
-- pg_repack of devices applies it to the existing ones.
ALTER TABLE devices SET (fillfactor = 80);

-- +goose Down
ALTER TABLE devices RESET (fillfactor);

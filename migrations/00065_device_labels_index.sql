-- +goose Up

-- Issue 26 item 4, reads at 1,000,000 devices (docs/design/performance.md
-- "Reads at a million devices"): a label selector with a site
-- (`ironlink get devices -l site=…,rack=…`, the fleet view's
-- `/devices?selector=…`) read all of the site's 10,000 devices to keep the
-- 500 of one rack, one heap page each. devices_labels indexes the
-- satellite's labels (facts.labels) for containment (@>, jsonb_path_ops:
-- one entry per key and value), so such a read takes the intersection of
-- this index and devices_site_id and visits only the matching rows. The
-- listings use it while the hub's labels file is empty (store.labelsExpr:
-- the effective labels are then facts.labels).
--
-- Built in the migration's transaction, not CONCURRENTLY: a CONCURRENTLY
-- build waits for every transaction open when it starts to end, and a
-- running hub always has one (the policy evaluator's lock transaction,
-- hub/policyrun), so during a rolling upgrade it would wait forever (seen:
-- hub/app TestNotReadyUntilMigrated hung 12 minutes). The plain build holds
-- a SHARE lock on devices: condition writes wait for it (15 s at 1,000,000
-- devices on the 2-core machine, docs/design/performance.md), reads go on.
-- It costs an index entry per device row version (devices updates that
-- change status or facts are not HOT updates already: other indexes hold
-- those columns).
CREATE INDEX IF NOT EXISTS devices_labels ON devices USING gin ((facts->'labels') jsonb_path_ops);
-- Statistics of the indexed expression (ANALYZE gathers them for an
-- expression index): without them PostgreSQL takes a label held by 50,000
-- devices for a rare one and reads all of them through the index for a
-- first page that walking the primary key finds in 2,000 devices.
ANALYZE devices;

-- +goose Down
DROP INDEX IF EXISTS devices_labels;

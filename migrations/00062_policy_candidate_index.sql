-- +goose Up

-- The policy evaluator's candidates (hub/store.PolicyCandidates, every
-- pass and on every hub start): the devices, not removed, in FAULTED or
-- MAINTENANCE, in site then id order. This partial index holds just them,
-- in that order, with the columns the pass reads from the device row, so
-- the pass reads them from the index (an index-only scan once vacuumed)
-- instead of visiting one heap page per candidate: at 200,000 devices
-- (12,011 candidates) that visit was 7,739 pages read and ~4.8 s of the
-- pass on a loaded machine (docs/design/performance.md).
CREATE INDEX devices_policy_candidates ON devices (site, id) INCLUDE (status, desired_impairment)
    WHERE status IN ('FAULTED', 'MAINTENANCE') AND NOT removed;

-- +goose Down
DROP INDEX devices_policy_candidates;

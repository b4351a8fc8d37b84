-- +goose Up

-- Validation rules of the policy (docs/reference/policy.md "Validation
-- rules"): a failed validation run that a rule with a ladder matches is
-- quarantined by that rule once; remediation_rule names it (its
-- idempotency key: '' while no rule took the run). The run's feed gains
-- the REMEDIATION event (the rule, its ladder's first step).
ALTER TABLE validation_runs ADD COLUMN remediation_rule text NOT NULL DEFAULT '';
-- The evaluator's pass reads the failed runs no rule took, not every device.
CREATE INDEX validation_runs_untaken ON validation_runs (ended_at) WHERE state = 'FAILED' AND remediation_rule = '';
ALTER TABLE validation_events DROP CONSTRAINT validation_events_event_check;
ALTER TABLE validation_events ADD CONSTRAINT validation_events_event_check
    CHECK (event IN ('STARTED', 'RESULT', 'PASSED', 'FAILED', 'REMEDIATION'));

-- +goose Down
DELETE FROM validation_events WHERE event = 'REMEDIATION';
ALTER TABLE validation_events DROP CONSTRAINT validation_events_event_check;
ALTER TABLE validation_events ADD CONSTRAINT validation_events_event_check
    CHECK (event IN ('STARTED', 'RESULT', 'PASSED', 'FAILED'));
DROP INDEX validation_runs_untaken;
ALTER TABLE validation_runs DROP COLUMN remediation_rule;

// Package policy is the hub's quarantine policy as data (docs/design/requirements.md
// "Quarantine policy"): the policy file (Parse, Load; a fleet-wide default
// with per-site overrides, in the hub chart's values shape), its watcher
// (Watcher: reloaded on SIGHUP and on change, the last good file kept), and
// the decision, a pure function (Decide for automatic quarantine with its
// hold-down, stale-trigger rules, maintenance windows, exclusions and the
// blast-radius guard; DecideRelease for automatic release, which the guard
// never blocks). The evaluator that applies decisions is hub/policyrun.
package policy

// Package conditions turns what the satellite observed about one Ironic
// node into the seven device conditions of docs/design/requirements.md ("Device conditions"),
// with the reason vocabulary of docs/design/openstack.md §2.3, and keeps the last
// conditions per device so that only changes are sent to the hub.
//
// [Map] is a pure function: the same [Config] and [Observation] always give
// the same conditions (all seven, in condition.Types order). Messages are
// stable: volatile parts of Ironic's last_error and maintenance_reason
// (timestamps, request ids, memory addresses, whitespace) are normalised and
// the text is truncated with condition.Truncate, so a repeating error or a
// flapping power-failure maintenance does not produce a new message each
// poll. A provision state this package does not know gives
// ProvisioningHealthy Unknown/UnrecognizedState, never a crash; "error"
// counts as a failure (TeardownFailed) although Ironic does not list it as
// one; a failure never depends on last_error being present (docs/design/openstack.md §8).
//
// Decisions where the references leave room:
//
//   - An empty validation-pool selector means the site has no pool:
//     InValidationPool is False/NotInPool with the message "no validation
//     pool is configured for this site".
//   - A selector with several keys matches when all of them match; a known
//     mismatch gives False even if another key's field is unavailable,
//     otherwise an unavailable field gives Unknown/FieldUnavailable.
//   - Enrolled is True with reason Enrolled and an empty message in every
//     state past enroll/verifying, so it does not change with every
//     provision-state change.
//   - ProvisioningHealthy reasons for healthy states: Available, Active,
//     Manageable, Enroll, Rescue (stable states), Held ("* hold"),
//     Transitioning (any other known transient state; message
//     "cleaning → available"). A "* wait" state older than CallbackTimeout
//     by provision_updated_at is False/TransitionStalled.
//   - CustomerAllocated needs a project: the node's lessee and/or the
//     instance's project (Observation.InstanceProject, filled from Nova by
//     the caller). Any non-internal one → True/CustomerProject; only
//     internal ones → False/InternalProject; an instance whose project is
//     not known → Unknown/ProjectUnknown; nothing → False/NotAllocated.
//   - CustomerReady on Nova sites reads the resource provider (Placement is
//     what the scheduler uses); on standalone sites the node's own traits.
//     ObservedGeneration is the hub command generation last applied.
//
// Staleness (§2.2): when Ironic or Placement cannot be read, callers keep
// the last conditions (do not call Map with a made-up node); the reasons
// IronicUnreachable and AuthenticationFailed are exported for a caller that
// wants to mark staleness itself after a while.
package conditions

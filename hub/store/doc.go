// Package store is the hub's PostgreSQL persistence (pgx v5): sites and their
// links, devices, current conditions, condition/status/impairment histories,
// quarantine/release commands, operations and the quarantine policy's
// records. Every write that a link acks happens in one transaction; schema
// changes live in ../../migrations and are applied by Migrate (goose) before
// anything else touches the database.
//
// The package is split by purpose; roles.go names each purpose's methods as
// an interface (callers depend on the roles, or on an interface of their
// own, rather than on *Store):
//
//   - Ingest, the link's write path: link.go (OpenLink, CloseLink,
//     ApplyBatch, status re-derivation), pipeline.go (SubmitBatch,
//     SubmitSiteConditions), group.go (the group committer),
//     groupapply.go (one group's transaction, step by step), groupmerge.go
//     (merging batches and deriving statuses in Go), grouprows.go and
//     groupsql.go (the set-based statements), siteconditions.go,
//     liveness.go (last seen, staleness).
//   - Commands: commands.go (desired impairment, retry: the operator's
//     side), setdesired.go (a desired state's statements in one round
//     trip), commands_delivery.go (due, sent, results: the link's side),
//     desired.go (desired states, drift corrections), bulk.go (bulk
//     quarantine and release), commandpool.go (the command path's pool).
//   - Operations: operations.go (the operator's side),
//     operations_delivery.go (the link's side), operations_steps.go (the
//     step record kept across attempts).
//   - Policy: policy_candidates.go (what the evaluator considers), policy.go
//     (sites, holds, decisions, the guard, pending expiry),
//     policy_evidence.go (a site's evidence, held while a command is
//     written), policy_awaiting.go (triggers awaiting fresh evidence
//     settled), policy_healed.go (triggers healed before a decision),
//     policy_api.go (listing and resolving for the policy API).
//   - Remediation: remediation.go (the ladders' durable position and
//     steps, their change-feed rows), remediation_handoff.go (repair
//     handoffs, the webhook's attempts).
//   - Change feed: package feed (below); feed.go keeps FeedNotifyChannel
//     and rowscan.go the row scanners the feed shares.
//   - Reads: queries.go, names.go, exists.go, explain.go (current state),
//     asof.go (a past instant).
//   - The rest: store.go (Open, Migrate, transactions), health.go
//     (readiness, metrics reads), replay.go (token replay cache), types.go
//     (the shapes), partitions.go (the as_of horizon; the partitions
//     themselves are package partitions).
//
// Sub-packages: feed is the change feed; notify is the replica's one
// LISTEN connection (Store.Notifications), fanning command, operation and
// feed notifications out to their subscribers; partitions keeps the
// history tables' partitions.
//
// The change feed (package feed: Reader.Read, Reader.Head) reads status
// changes, command and operation state changes, policy decisions and pending
// action resolutions (feed/sources.go) in commit-safe order: every source row carries
// its writing transaction's xid8, and only rows of transactions older than
// the oldest one still running in this database are read, ordered by
// (xid, source, id). To add a source: a migration gives its table `xid xid8 DEFAULT
// pg_current_xact_id()` and an (xid, id) index (or an events table filled by
// an AFTER trigger, like command_events), optionally a
// NOTIFY on FeedNotifyChannel in that trigger; then one entry in
// feed's feedSources (a new, never reused source number, the kind, the query, the
// scan); then a FleetEventKind and a FleetEvent oneof member in fleet.proto,
// filled by hub/fleet's eventToProto. Package feed's doc has the details.
//
// Errors: ErrNotFound, ErrFenced and ErrWrongSite are returned wrapped; test
// with errors.Is. Everything else is a database error wrapped with context.
package store

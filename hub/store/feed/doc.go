// Package feed is the hub's change feed (FleetService.WatchFleet): device
// status changes, command and operation state changes, policy decisions
// and pending action resolutions as they commit, in one order, read by a
// Reader from a Cursor on any replica without gaps or duplicates. New rows
// of most sources are announced on NotifyChannel (hints; status changes
// are not announced, watchers poll for those).
//
// The change feed (FleetService.WatchFleet, docs/design/requirements.md "Explaining and
// replaying"): device status changes, command and operation state changes,
// policy decisions and pending action resolutions as they commit, resumable from a cursor on any replica without gaps or duplicates.
//
// Commit-safe order. Every source row carries the id of the transaction
// that wrote it (an xid8 column, DEFAULT pg_current_xact_id(): free on the
// write path, no trigger on ingest). A read takes the watermark W, the
// oldest transaction still running in the hub's database
// (pg_snapshot_xmin(pg_current_snapshot()) narrowed to this database, see
// watermarkQuery), and reads only rows with xid < W: every transaction of
// this database below W has committed or aborted, so no row can later
// appear below W. Rows are ordered
// by (xid, source number, id) and a cursor is a position in that order. A
// bigserial alone would not do: transaction A takes id 1, B takes id 2 and
// commits first, a reader passes id 2, and A's row is never read. Here B's
// row waits until A has finished, then both come, A's first. The price is
// latency: a long-running writing transaction in the hub's database holds
// the feed back until it ends (one in another database does not).
//
// Adding a source (as operation_events, policy_decisions and
// policy_pending_events were, migrations/00016, sources.go):
//  1. a migration adds `xid xid8 DEFAULT pg_current_xact_id()` and an index
//     on (xid, id) to the source table, or, when rows are updated in place,
//     an events table filled by an AFTER trigger (as command_events is for
//     commands, migrations/00013_change_feed.sql); a trigger may
//     `pg_notify('ironlink_feed', ”)` so watchers wake at once;
//  2. one entry in feedSources (sources.go): a new never-reused number, the kind,
//     the query (same parameters and result prefix as the others) and the
//     scan; a new Kind and a field of Event;
//  3. the proto: a FleetEventKind value and a member of FleetEvent's oneof,
//     filled in hub/fleet/watch.go.
package feed

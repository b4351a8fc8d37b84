// Package store is the hub's PostgreSQL persistence (pgx v5): sites and their
// links, devices, current conditions, condition/status/impairment histories
// and quarantine/release commands. Every write that a link acks happens in one
// transaction; schema changes live in ../../migrations and are applied by
// Migrate (goose) before anything else touches the database.
//
// The change feed (feed.go: ReadFeed, FeedHead) reads status
// changes, command and operation state changes, policy decisions and pending
// action resolutions (feed_sources.go) in commit-safe order: every source row carries
// its writing transaction's xid8, and only rows of transactions older than
// the oldest one still running in this database are read, ordered by
// (xid, source, id). To add a source: a migration gives its table `xid xid8 DEFAULT
// pg_current_xact_id()` and an (xid, id) index (or an events table filled by
// an AFTER trigger, like command_events), optionally a
// NOTIFY on FeedNotifyChannel in that trigger; then one entry in
// feedSources (a new, never reused source number, the kind, the query, the
// scan); then a FleetEventKind and a FleetEvent oneof member in fleet.proto,
// filled by hub/fleet's eventToProto. feed.go's comment has the details.
//
// Errors: ErrNotFound, ErrFenced and ErrWrongSite are returned wrapped; test
// with errors.Is. Everything else is a database error wrapped with context.
package store

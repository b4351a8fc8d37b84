package store

// The change feed (FleetService.WatchFleet, SPEC.md "Explaining and
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
// policy_pending_events were, migrations/00016, feed_sources.go):
//  1. a migration adds `xid xid8 DEFAULT pg_current_xact_id()` and an index
//     on (xid, id) to the source table, or, when rows are updated in place,
//     an events table filled by an AFTER trigger (as command_events is for
//     commands, migrations/00013_change_feed.sql); a trigger may
//     `pg_notify('ironlink_feed', '')` so watchers wake at once;
//  2. one entry in feedSources below: a new never-reused number, the kind,
//     the query (same parameters and result prefix as the others) and the
//     scan; a new EventKind and a field of FeedEvent;
//  3. the proto: a FleetEventKind value and a member of FleetEvent's oneof,
//     filled in hub/fleet/watch.go.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/hub/status"
)

// FeedNotifyChannel is the LISTEN/NOTIFY channel on which feed sources
// announce new rows (the triggers of command_events, operation_events,
// policy_decisions and policy_pending_events do; status changes do not,
// to keep ingest free of it: watchers poll for those). A hint only.
const FeedNotifyChannel = "ironlink_feed"

// EventKind names a kind of feed event.
type EventKind string

// Feed event kinds (see proto FleetEventKind).
const (
	// EventDeviceStatus: a status history entry.
	EventDeviceStatus EventKind = "DEVICE_STATUS"
	// EventCommandState: a command was created, changed state or was sent again.
	EventCommandState EventKind = "COMMAND_STATE"
)

// FeedCursor is a position in the feed: after every event whose
// (XID, Source, ID) sorts at or before it. The zero cursor is before the
// oldest event.
type FeedCursor struct {
	// XID is the writing transaction's id (xid8).
	XID uint64
	// Source is the feed source's number (feedSources).
	Source int
	// ID is the row's id within its source.
	ID int64
}

// String renders c as "XID.SOURCE.ID" (ParseFeedCursor reads it back).
func (c FeedCursor) String() string {
	return fmt.Sprintf("%d.%d.%d", c.XID, c.Source, c.ID)
}

// Less reports whether c sorts before o.
func (c FeedCursor) Less(o FeedCursor) bool {
	if c.XID != o.XID {
		return c.XID < o.XID
	}
	if c.Source != o.Source {
		return c.Source < o.Source
	}
	return c.ID < o.ID
}

// ParseFeedCursor reads a cursor written by FeedCursor.String. Errors: a
// malformed cursor (not three non-negative decimal numbers).
func ParseFeedCursor(s string) (FeedCursor, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return FeedCursor{}, fmt.Errorf("cursor %q is not XID.SOURCE.ID", s)
	}
	x, err1 := strconv.ParseUint(parts[0], 10, 64)
	src, err2 := strconv.ParseUint(parts[1], 10, 16)
	id, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || id < 0 {
		return FeedCursor{}, fmt.Errorf("cursor %q is not XID.SOURCE.ID", s)
	}
	return FeedCursor{XID: x, Source: int(src), ID: id}, nil
}

// FeedFilter selects feed events.
type FeedFilter struct {
	// Site, when non-empty, keeps events of that site.
	Site string
	// Sites, when non-nil, keeps only events of these sites (an operator
	// bound to sites); an empty non-nil slice keeps none.
	Sites []string
	// Statuses, when non-empty, keeps status events into or out of one of
	// them; other kinds are not filtered by status.
	Statuses []status.Status
	// Kinds, when non-empty, keeps only these kinds.
	Kinds []EventKind
}

// StatusEvent is a device status change.
type StatusEvent struct {
	DeviceID, Site, Name string
	Status               status.Status
	Reason               string
	// Previous is the status before ("" for the device's first one).
	Previous status.Status
}

// CommandEvent is a command as it was right after one of its changes.
type CommandEvent struct {
	// Command has the state, attempts, errors and times of that moment.
	Command Command
	// Previous is the state before ("" when the command was created).
	Previous CommandState
	// DeviceName is the name of the command's device.
	DeviceName string
}

// FeedEvent is one event of the feed.
type FeedEvent struct {
	// Cursor is the event's position: resuming from it continues after it.
	Cursor FeedCursor
	Kind   EventKind
	// At is when the change was recorded.
	At time.Time
	// Status is set for EventDeviceStatus, Command for EventCommandState,
	// Operation for EventOperationState, Decision for EventPolicyDecision,
	// Pending for EventPendingAction (feed_sources.go).
	Status    *StatusEvent
	Command   *CommandEvent
	Operation *OperationEvent
	Decision  *PolicyDecisionEvent
	Pending   *PendingActionEvent
}

// feedSource is one table the feed reads. Every query takes $1 the
// watermark, $2 and $3 the (xid, id) to read after, $4 the limit, $5 the
// site filter, $6 the sites allowed, $7 the statuses; it returns xid::text
// and id first, in (xid, id) order.
type feedSource struct {
	// no is the source's number in cursors; never change or reuse one.
	no    int
	kind  EventKind
	query string
	scan  func(pgx.CollectableRow) (FeedEvent, error)
}

var feedSources = []feedSource{
	{no: 1, kind: EventDeviceStatus, query: `
		SELECT h.xid::text, h.id, h.changed_at, h.device_id::text, d.site, d.name, h.status, h.reason, COALESCE(p.status, '')
		FROM status_history h
		JOIN devices d ON d.id = h.device_id
		LEFT JOIN LATERAL (SELECT status FROM status_history p
			WHERE p.device_id = h.device_id AND (p.changed_at, p.id) < (h.changed_at, h.id)
			ORDER BY p.changed_at DESC, p.id DESC LIMIT 1) p ON true
		WHERE h.xid < $1::text::xid8 AND (h.xid, h.id) > ($2::text::xid8, $3::bigint)
		  AND ($5 = '' OR d.site = $5) AND ($6::text[] IS NULL OR d.site = ANY($6::text[]))
		  AND (cardinality($7::text[]) = 0 OR h.status = ANY($7::text[]) OR p.status = ANY($7::text[]))
		ORDER BY h.xid, h.id LIMIT $4`,
		scan: func(r pgx.CollectableRow) (FeedEvent, error) {
			var e StatusEvent
			var x string
			var ev FeedEvent
			var st, prev string
			err := r.Scan(&x, &ev.Cursor.ID, &ev.At, &e.DeviceID, &e.Site, &e.Name, &st, &e.Reason, &prev)
			e.Status, e.Previous = status.Status(st), status.Status(prev)
			ev.Kind, ev.Status = EventDeviceStatus, &e
			ev.Cursor.XID, _ = strconv.ParseUint(x, 10, 64)
			return ev, err
		}},
	{no: 2, kind: EventCommandState, query: `
		SELECT e.xid::text, e.id, e.recorded_at, c.id::text, c.device_id::text, c.site, c.generation, c.desired, e.state,
			c.actor, c.reason, c.source, e.attempts, e.last_error, e.result_detail, c.created_at, e.updated_at,
			e.completed_at, e.failure_class, e.failure_reason, e.previous_state, d.name
		FROM command_events e
		JOIN commands c ON c.id = e.command_id
		JOIN devices d ON d.id = c.device_id
		WHERE e.xid < $1::text::xid8 AND (e.xid, e.id) > ($2::text::xid8, $3::bigint)
		  AND ($5 = '' OR c.site = $5) AND ($6::text[] IS NULL OR c.site = ANY($6::text[]))
		  AND cardinality($7::text[]) >= 0
		ORDER BY e.xid, e.id LIMIT $4`,
		scan: func(r pgx.CollectableRow) (FeedEvent, error) {
			var e CommandEvent
			var x, desired, state, class, prev string
			var ev FeedEvent
			c := &e.Command
			err := r.Scan(&x, &ev.Cursor.ID, &ev.At, &c.ID, &c.DeviceID, &c.Site, &c.Generation, &desired, &state,
				&c.Actor, &c.Reason, &c.Source, &c.Attempts, &c.LastError, &c.ResultDetail, &c.CreatedAt, &c.UpdatedAt,
				&c.CompletedAt, &class, &c.FailureReason, &prev, &e.DeviceName)
			c.Desired, c.State, c.FailureClass = Impairment(desired), CommandState(state), FailureClass(class)
			e.Previous = CommandState(prev)
			ev.Kind, ev.Command = EventCommandState, &e
			ev.Cursor.XID, _ = strconv.ParseUint(x, 10, 64)
			return ev, err
		}},
	{no: 3, kind: EventOperationState, query: feedOperationQuery, scan: scanFeedOperation},
	{no: 4, kind: EventPolicyDecision, query: feedDecisionQuery, scan: scanFeedDecision},
	{no: 5, kind: EventPendingAction, query: feedPendingQuery, scan: scanFeedPending},
}

// FeedHead returns the cursor of "now": after every event that can no
// longer be preceded by another (all transactions below the watermark).
func (s *Store) FeedHead(ctx context.Context) (FeedCursor, error) {
	w, err := s.watermark(ctx)
	if err != nil {
		return FeedCursor{}, err
	}
	return FeedCursor{XID: w}, nil
}

// FeedCursorValid reports whether c can be a cursor of this database: its
// transaction id is not beyond the newest one assigned (a cursor from
// another database or a made-up one is not). Errors are database errors.
func (s *Store) FeedCursorValid(ctx context.Context, c FeedCursor) (bool, error) {
	var xmax string
	if err := s.pool.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text`).Scan(&xmax); err != nil {
		return false, fmt.Errorf("feed: read snapshot: %w", err)
	}
	m, err := strconv.ParseUint(xmax, 10, 64)
	if err != nil {
		return false, fmt.Errorf("feed: snapshot xmax %q: %w", xmax, err)
	}
	return c.XID <= m, nil
}

// watermarkQuery is the feed's watermark: the oldest transaction of the
// statement's snapshot still running that is not known to belong to another
// database of the cluster (the snapshot's xmax when there is none). It is
// pg_snapshot_xmin narrowed so that a long transaction in another database
// does not hold the feed back. Only transactions positively seen in another
// database (pg_stat_activity with their database, or pg_prepared_xacts) are
// left out; a transaction whose session this role may not see (its
// backend_xid reads NULL) still counts, as does one that has ended since the
// snapshot (later reads see its rows). Sound because the snapshot is taken
// at statement start, before pg_stat_activity is read, transactions never
// change database, and one that starts later has an xid at or above xmax.
const watermarkQuery = `
	WITH snap AS (SELECT pg_current_snapshot() AS s),
	elsewhere AS (
		SELECT backend_xid AS x FROM pg_stat_activity
		WHERE datid IS NOT NULL AND datid <> (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND backend_xid IS NOT NULL
		UNION ALL
		SELECT transaction FROM pg_prepared_xacts WHERE database <> current_database())
	SELECT COALESCE(
		(SELECT min(x) FROM snap, pg_snapshot_xip(snap.s) AS x WHERE xid(x) NOT IN (SELECT x FROM elsewhere)),
		(SELECT pg_snapshot_xmax(s) FROM snap))::text`

func (s *Store) watermark(ctx context.Context) (uint64, error) {
	var w string
	if err := s.pool.QueryRow(ctx, watermarkQuery).Scan(&w); err != nil {
		return 0, fmt.Errorf("feed: read watermark: %w", err)
	}
	x, err := strconv.ParseUint(w, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("feed: watermark %q: %w", w, err)
	}
	return x, nil
}

// ReadFeed returns up to limit events (1-10000) of f after cursor after,
// in feed order, the cursor to continue from, and whether more events
// are already readable (call again at once). The cursor returned may be
// past the last event (the events in between did not match f, or there
// were none): resuming from it skips nothing f would keep. Errors are
// database errors.
func (s *Store) ReadFeed(ctx context.Context, after FeedCursor, f FeedFilter, limit int) ([]FeedEvent, FeedCursor, bool, error) {
	w, err := s.watermark(ctx)
	if err != nil {
		return nil, after, false, err
	}
	sts := make([]string, len(f.Statuses))
	for i, st := range f.Statuses {
		sts[i] = string(st)
	}
	var all []FeedEvent
	// limitPos is the lowest last position of a source that filled its
	// limit: beyond it, that source may have more, so nothing beyond it
	// is returned this time.
	var limitPos *FeedCursor
	for _, src := range feedSources {
		if len(f.Kinds) > 0 && !slices.Contains(f.Kinds, src.kind) {
			continue
		}
		// The source's own (xid, id) to read after: a cursor at a lower
		// source number of the same xid reads all of that xid, one at a
		// higher number none of it.
		afterID := after.ID
		switch {
		case src.no > after.Source:
			afterID = 0
		case src.no < after.Source:
			afterID = 1<<63 - 1
		}
		rows, err := s.pool.Query(ctx, src.query, strconv.FormatUint(w, 10), strconv.FormatUint(after.XID, 10), afterID,
			limit, f.Site, f.Sites, sts)
		if err != nil {
			return nil, after, false, fmt.Errorf("feed: read %s: %w", src.kind, err)
		}
		evs, err := pgx.CollectRows(rows, src.scan)
		if err != nil {
			return nil, after, false, fmt.Errorf("feed: read %s: %w", src.kind, err)
		}
		for i := range evs {
			evs[i].Cursor.Source = src.no
		}
		if len(evs) == limit {
			last := evs[len(evs)-1].Cursor
			if limitPos == nil || last.Less(*limitPos) {
				limitPos = &last
			}
		}
		all = append(all, evs...)
	}
	slices.SortFunc(all, func(a, b FeedEvent) int {
		switch {
		case a.Cursor.Less(b.Cursor):
			return -1
		case b.Cursor.Less(a.Cursor):
			return 1
		}
		return 0
	})
	next := FeedCursor{XID: w}
	if limitPos != nil {
		n := 0
		for n < len(all) && !limitPos.Less(all[n].Cursor) {
			n++
		}
		all = all[:n]
		next = *limitPos
	}
	if next.Less(after) {
		next = after // never move back (a cursor handed out at a newer watermark)
	}
	return all, next, limitPos != nil, nil
}

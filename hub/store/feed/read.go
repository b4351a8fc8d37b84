package feed

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ironlink/ironlink/hub/store"
)

// NotifyChannel is the LISTEN/NOTIFY channel on which feed sources
// announce new rows (store.FeedNotifyChannel; subscribe through the
// replica's dispatcher, store.Store.Notifications). A hint only.
const NotifyChannel = store.FeedNotifyChannel

// Reader reads the feed of one database. Safe for concurrent use.
type Reader struct {
	pool *pgxpool.Pool
}

// NewReader returns a reader of the feed of pool's database.
func NewReader(pool *pgxpool.Pool) *Reader { return &Reader{pool: pool} }

// Head returns the cursor of "now": after every event that can no
// longer be preceded by another (all transactions below the watermark).
func (r *Reader) Head(ctx context.Context) (Cursor, error) {
	w, err := r.watermark(ctx)
	if err != nil {
		return Cursor{}, err
	}
	return Cursor{XID: w}, nil
}

// CursorValid reports whether c can be a cursor of this database: its
// transaction id is not beyond the newest one assigned (a cursor from
// another database or a made-up one is not). Errors are database errors.
func (r *Reader) CursorValid(ctx context.Context, c Cursor) (bool, error) {
	var xmax string
	if err := r.pool.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text`).Scan(&xmax); err != nil {
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

func (r *Reader) watermark(ctx context.Context) (uint64, error) {
	var w string
	if err := r.pool.QueryRow(ctx, watermarkQuery).Scan(&w); err != nil {
		return 0, fmt.Errorf("feed: read watermark: %w", err)
	}
	x, err := strconv.ParseUint(w, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("feed: watermark %q: %w", w, err)
	}
	return x, nil
}

// Read returns up to limit events (1-10000) of f after cursor after,
// in feed order, the cursor to continue from, and whether more events
// are already readable (call again at once). The cursor returned may be
// past the last event (the events in between did not match f, or there
// were none): resuming from it skips nothing f would keep. Errors are
// database errors.
func (r *Reader) Read(ctx context.Context, after Cursor, f Filter, limit int) ([]Event, Cursor, bool, error) {
	w, err := r.watermark(ctx)
	if err != nil {
		return nil, after, false, err
	}
	sts := make([]string, len(f.Statuses))
	for i, st := range f.Statuses {
		sts[i] = string(st)
	}
	var all []Event
	// limitPos is the lowest last position of a source that filled its
	// limit: beyond it, that source may have more, so nothing beyond it
	// is returned this time.
	var limitPos *Cursor
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
		// Planned with this read's values every time (QueryExecModeDescribeExec:
		// the unnamed statement, never a cached generic plan; binary
		// results, unlike QueryExecModeExec's text). Since the
		// history tables lost their foreign key to devices (migration
		// 00071) the generic plan of the status source guessed 3 devices
		// for "($5 = '' OR d.site = $5)", drove the join from devices and
		// sorted every unread status row: 0.8-6.4 s a read against a few
		// ms (test/faults TestSlowWatchFleetConsumer stalled on it).
		rows, err := r.pool.Query(ctx, src.query, pgx.QueryExecModeDescribeExec, strconv.FormatUint(w, 10), strconv.FormatUint(after.XID, 10), afterID,
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
	slices.SortFunc(all, func(a, b Event) int {
		switch {
		case a.Cursor.Less(b.Cursor):
			return -1
		case b.Cursor.Less(a.Cursor):
			return 1
		}
		return 0
	})
	next := Cursor{XID: w}
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

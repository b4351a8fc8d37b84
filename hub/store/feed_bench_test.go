package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/store/feed"
)

// BenchmarkStatusHistoryXidDefault measures the ingest-path cost of the
// feed's xid8 column default: inserting 1,000 status_history rows in one
// statement, against the raw reference of the same insert into a table of
// the same shape (columns, identity, indexes; no foreign key, as
// status_history has none since migration 00071) without the
// column, in the same run. Reported: ns per row
// of each and their ratio.
func BenchmarkStatusHistoryXidDefault(b *testing.B) {
	ctx := context.Background()
	st, _ := newBenchStore(b)
	if _, err := st.Pool().Exec(ctx, `CREATE TABLE status_history_raw (LIKE status_history INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING INDEXES)`); err != nil {
		b.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `ALTER TABLE status_history_raw DROP COLUMN xid`); err != nil {
		b.Fatal(err)
	}
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "bench", Replica: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	dev := addDeviceB(b, st, "bench", sess)
	const rows = 1000
	insert := func(table string) time.Duration {
		start := time.Now()
		if _, err := st.Pool().Exec(ctx, `INSERT INTO `+table+` (device_id, status, reason)
			SELECT $1::uuid, 'FAULTED', 'bench ' || g FROM generate_series(1, $2) g`, dev, rows); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var withXid, raw time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		raw += insert("status_history_raw")
		withXid += insert("status_history")
	}
	n := float64(b.N * rows)
	b.ReportMetric(float64(withXid.Nanoseconds())/n, "ns/row-feed")
	b.ReportMetric(float64(raw.Nanoseconds())/n, "ns/row-raw")
	b.ReportMetric(float64(withXid)/float64(raw), "ratio")
}

// BenchmarkFeedCommitToRead measures how long a committed status change
// takes to become readable from the feed (insert, commit, ReadFeed until it
// is there), against the raw reference of the insert and commit alone, in
// the same run. Reported: µs of each and their ratio.
func BenchmarkFeedCommitToRead(b *testing.B) {
	ctx := context.Background()
	st, _ := newBenchStore(b)
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "bench", Replica: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	dev := addDeviceB(b, st, "bench", sess)
	cur, err := feedOf(st).Head(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var total, commit time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := st.Pool().Exec(ctx, `INSERT INTO status_history (device_id, status, reason) VALUES ($1, 'FAULTED', 'bench')`, dev); err != nil {
			b.Fatal(err)
		}
		commit += time.Since(start)
		for seen := false; !seen; {
			evs, next, _, err := feedOf(st).Read(ctx, cur, feed.Filter{}, 100)
			if err != nil {
				b.Fatal(err)
			}
			cur, seen = next, len(evs) > 0
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/commit-to-read")
	b.ReportMetric(float64(commit.Microseconds())/float64(b.N), "µs/commit-raw")
	b.ReportMetric(float64(total)/float64(commit), "ratio")
}

func addDeviceB(b *testing.B, st *store.Store, site string, sess store.LinkSession) string {
	b.Helper()
	now := time.Now().UTC()
	id := "00000000-0000-4000-8000-000000000001"
	if _, err := st.ApplyBatch(context.Background(), site, sess.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{{
		DeviceID: id, Conditions: conds(now, nil), ObservedTime: now}}}); err != nil {
		b.Fatal(err)
	}
	return id
}

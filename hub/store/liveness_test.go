package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/pgtest"
)

// TestFlushLastSeenOneStatementFencedAndBusy: one flush refreshes every
// current link's site to the database's now() minus its age, refuses a
// superseded link's report (the newer epoch's site is not refreshed by it,
// and the report comes back as fenced), and skips a site whose row another
// transaction holds (reported busy, nothing waited for).
func TestFlushLastSeenOneStatementFencedAndBusy(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	a, b := open(t, s, "site-a"), open(t, s, "site-b")
	old := open(t, s, "site-c")
	cur := open(t, s, "site-c") // supersedes old
	busy := open(t, s, "site-d")
	pgtest.MustExec(t, url, `UPDATE sites SET last_seen_at = now() - interval '1 hour'`)

	// Hold site-d's row as a batch commit would.
	pool := s.Pool()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM sites WHERE name = 'site-d' FOR NO KEY UPDATE`); err != nil {
		t.Fatal(err)
	}

	res, err := s.FlushLastSeen(ctx, []store.LastSeen{
		{Site: "site-a", Epoch: a.Epoch, Age: 0},
		{Site: "site-b", Epoch: b.Epoch, Age: 30 * time.Second},
		{Site: "site-c", Epoch: old.Epoch},
		{Site: "site-d", Epoch: busy.Epoch},
		{Site: "no-such-site", Epoch: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Refreshed != 2 || len(res.Fenced) != 2 || len(res.Busy) != 1 || res.Busy[0].Site != "site-d" || len(res.Recovered) != 0 {
		t.Fatalf("flush result %+v", res)
	}
	age := func(site string) time.Duration {
		var secs float64
		if err := pool.QueryRow(ctx, `SELECT extract(epoch FROM now() - last_seen_at) FROM sites WHERE name = $1`, site).Scan(&secs); err != nil {
			t.Fatal(err)
		}
		return time.Duration(secs * float64(time.Second))
	}
	if d := age("site-a"); d > 5*time.Second {
		t.Errorf("site-a last seen %s ago, want just now", d)
	}
	if d := age("site-b"); d < 29*time.Second || d > 40*time.Second {
		t.Errorf("site-b last seen %s ago, want its report's 30 s", d)
	}
	if d := age("site-c"); d < 59*time.Minute {
		t.Errorf("site-c refreshed by a superseded link (epoch %d, current %d): last seen %s ago", old.Epoch, cur.Epoch, d)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if d := age("site-d"); d < 59*time.Minute {
		t.Errorf("site-d refreshed although busy: last seen %s ago", d)
	}

	// last_seen_at never moves backwards: an older report changes nothing.
	if _, err := s.FlushLastSeen(ctx, []store.LastSeen{{Site: "site-a", Epoch: a.Epoch, Age: 10 * time.Minute}}); err != nil {
		t.Fatal(err)
	}
	if d := age("site-a"); d > 5*time.Second {
		t.Errorf("site-a moved back to %s ago by an older report", d)
	}
}

// TestMarkStaleSitesOneStatement: the sweep flags only sites silent for
// longer than stale_after, makes their reported devices UNREACHABLE with
// their last status kept and one history row each, leaves a never-reported
// device UNKNOWN, and a second sweep changes nothing. A flush then brings
// the devices back to their derived status (and a fresh link clears
// staleness, too).
func TestMarkStaleSitesOneStatement(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	silent, alive := open(t, s, "silent"), open(t, s, "alive")
	now := time.Now().UTC()
	reported, bare, other := uuid.NewString(), uuid.NewString(), uuid.NewString()
	if _, err := s.ApplyBatch(ctx, "silent", silent.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{
		{DeviceID: reported, Conditions: conds(now, nil), ObservedTime: now},
		{DeviceID: bare, ObservedTime: now}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyBatch(ctx, "alive", alive.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{
		{DeviceID: other, Conditions: conds(now, nil), ObservedTime: now}}}); err != nil {
		t.Fatal(err)
	}
	pgtest.MustExec(t, url, `UPDATE sites SET last_seen_at = now() - interval '10 minutes' WHERE name = 'silent'`)
	before := pgtest.Count(t, url, `SELECT count(*) FROM status_history`)
	stale, err := s.MarkStaleSites(ctx, 3*time.Minute)
	if err != nil || len(stale) != 1 || stale[0] != "silent" {
		t.Fatalf("stale: %v %v", stale, err)
	}
	d, _ := s.GetDevice(ctx, reported)
	if d.Status != status.Unreachable || d.StatusReason != "SiteStale" || d.LastKnownStatus != status.Available {
		t.Fatalf("stale device: %s %q last known %s", d.Status, d.StatusReason, d.LastKnownStatus)
	}
	if d, _ := s.GetDevice(ctx, bare); d.Status != status.Unknown {
		t.Fatalf("never-reported device of a stale site: %s, want UNKNOWN", d.Status)
	}
	if d, _ := s.GetDevice(ctx, other); d.Status != status.Available {
		t.Fatalf("device of a live site: %s", d.Status)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM status_history`) - before; n != 1 {
		t.Fatalf("%d status history rows for one device going UNREACHABLE", n)
	}
	if again, err := s.MarkStaleSites(ctx, 3*time.Minute); err != nil || len(again) != 0 {
		t.Fatalf("second sweep: %v %v", again, err)
	}

	res, err := s.FlushLastSeen(ctx, []store.LastSeen{{Site: "silent", Epoch: silent.Epoch}})
	if err != nil || len(res.Recovered) != 1 {
		t.Fatalf("flush after staleness: %+v %v", res, err)
	}
	if d, _ := s.GetDevice(ctx, reported); d.Status != status.Available || d.LastKnownStatus != "" {
		t.Fatalf("after the flush: %s (last known %q)", d.Status, d.LastKnownStatus)
	}

	pgtest.MustExec(t, url, `UPDATE sites SET last_seen_at = now() - interval '10 minutes' WHERE name = 'silent'`)
	if stale, err := s.MarkStaleSites(ctx, 3*time.Minute); err != nil || len(stale) != 1 {
		t.Fatalf("stale again: %v %v", stale, err)
	}
	open(t, s, "silent")
	if d, _ := s.GetDevice(ctx, reported); d.Status != status.Available {
		t.Fatalf("after a fresh link: %s", d.Status)
	}
}

package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/hub/store"
)

// A transaction that inserts a row referring to a device through a
// foreign key (a command, a hold) holds a FOR KEY SHARE lock on the device
// row until it commits; before migrations 00071 and 00074 so did every
// history append and every new condition row of a group.
// A quarantine, a release or a desired-state write locks the device row
// FOR NO KEY UPDATE, which that lock does not block, so they do not wait
// for such a transaction (issue 26 item 1; docs/design/performance.md
// "Quarantine under ingest, fourth step"). With FOR UPDATE each of these
// calls waited until the transaction below ended (5 s here).
func TestDesiredStateWritesDoNotWaitForKeyShareLocks(t *testing.T) {
	ctx := context.Background()
	s, url, id := storeWithDevice(t)

	conn := connect(t, url)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// What the foreign key check of a new command or hold takes.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM devices WHERE id = $1 FOR KEY SHARE`, id); err != nil {
		t.Fatal(err)
	}

	calls := []struct {
		name string
		call func(context.Context) error
	}{
		{"Quarantine", func(ctx context.Context) error {
			_, err := s.Quarantine(ctx, id, store.HolderOperator, op)
			return err
		}},
		{"Release", func(ctx context.Context) error {
			_, _, err := s.Release(ctx, id, store.HolderOperator, false, op, false)
			return err
		}},
		{"SetDesiredImpairment", func(ctx context.Context) error {
			_, err := s.SetDesiredImpairment(ctx, id, store.ImpairmentQuarantined, "alice", "test", "operator-api")
			return err
		}},
	}
	for _, c := range calls {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		start := time.Now()
		err := c.call(cctx)
		cancel()
		if err != nil {
			t.Fatalf("%s while a transaction holds a key-share lock on the device: %v (after %v)", c.name, err, time.Since(start).Round(time.Millisecond))
		}
	}
}

// A command's delivery and its result defer their change-feed
// notification to after their commit (migration 00073): a watcher
// listening on FeedNotifyChannel is still woken by each.
func TestDeliveryAndResultWakeTheFeed(t *testing.T) {
	ctx := context.Background()
	s, url, id := storeWithDevice(t)
	q, err := s.SetDesiredImpairment(ctx, id, store.ImpairmentQuarantined, "alice", "test", "operator-api")
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, url)
	if _, err := conn.Exec(ctx, "LISTEN "+store.FeedNotifyChannel); err != nil {
		t.Fatal(err)
	}
	woken := func(what string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := conn.WaitForNotification(wctx); err != nil {
			t.Fatalf("no change-feed notification after %s: %v", what, err)
		}
		// Drain what else came (one hint may cover several commits).
		for {
			dctx, dcancel := context.WithTimeout(ctx, 100*time.Millisecond)
			_, err := conn.WaitForNotification(dctx)
			dcancel()
			if err != nil {
				return
			}
		}
	}
	// The setting does keep the trigger from notifying.
	raw := connect(t, url)
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('ironlink.feed_notify', 'deferred', true)`)
	b.Queue(`UPDATE commands SET attempts = attempts + 1 WHERE id = $1`, q.ID)
	if err := raw.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	qctx, qcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	n, err := conn.WaitForNotification(qctx)
	qcancel()
	if err == nil {
		t.Fatalf("a command event written with ironlink.feed_notify=deferred notified from the trigger: %+v", n)
	}
	if err := s.MarkSent(ctx, q.ID); err != nil {
		t.Fatal(err)
	}
	woken("the command was sent")
	if _, err := s.RecordResult(ctx, "site-a", store.CommandResult{CommandID: q.ID, DeviceID: id, Generation: q.Generation, Success: true}); err != nil {
		t.Fatal(err)
	}
	woken("its result")
	if c, err := s.GetCommand(ctx, q.ID); err != nil || c.State != store.CommandSucceeded {
		t.Fatalf("command after its result: %+v %v", c, err)
	}
}

// storeWithDevice returns a store (and its database URL) with one device
// of site-a, reported once over an open link.
func storeWithDevice(t *testing.T) (*store.Store, string, string) {
	t.Helper()
	s, url := newStore(t)
	sess := open(t, s, "site-a")
	now := time.Now().UTC()
	id := uuid.NewString()
	if _, err := s.ApplyBatch(context.Background(), "site-a", sess.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{
		{DeviceID: id, Conditions: conds(now, nil), ObservedTime: now},
	}}); err != nil {
		t.Fatal(err)
	}
	return s, url, id
}

// connect returns a plain connection to the store's database, closed when
// the test ends: a transaction of its own beside the store's.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

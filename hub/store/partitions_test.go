package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/store/partitions"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// keeper returns a partition keeper on s's pool that logs nowhere.
func keeper(s *store.Store) *partitions.Keeper {
	return partitions.NewKeeper(s.Pool(), testlog.Discard())
}

// partitionsOf returns table's partitions in range order.
func partitionsOf(t *testing.T, s *store.Store, table string) []partitions.Partition {
	t.Helper()
	all, err := partitions.List(context.Background(), s.Pool())
	if err != nil {
		t.Fatal(err)
	}
	var out []partitions.Partition
	for _, p := range all {
		if p.Table == table {
			out = append(out, p)
		}
	}
	return out
}

// newHistoryDevice commits one device with seven conditions (seven
// condition_history rows and one status_history row) and returns its id.
func newHistoryDevice(t *testing.T, s *store.Store, site string) string {
	t.Helper()
	sess := open(t, s, site)
	id := uuid.NewString()
	now := time.Now().UTC()
	if _, err := s.ApplyBatch(context.Background(), site, sess.Epoch, store.Batch{Sequence: sess.LastSequence + 1,
		Devices: []store.DeviceUpdate{{DeviceID: id, Conditions: conds(now, nil), ObservedTime: now}}}); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestMigrationLeavesLegacyAndTailPartitions(t *testing.T) {
	s, url := newStore(t)
	for _, table := range []string{"condition_history", "status_history"} {
		ps := partitionsOf(t, s, table)
		if len(ps) != 2 || ps[0].Name != table+"_legacy" || ps[0].From != nil || ps[1].Name != table+"_tail" || ps[1].To != nil ||
			!ps[0].To.Equal(*ps[1].From) || ps[0].To.Weekday() != time.Monday || !ps[0].To.After(time.Now()) {
			t.Fatalf("%s partitions after migration: %+v", table, ps)
		}
	}
	newHistoryDevice(t, s, "site-a")
	if got := pgtest.QueryString(t, url, `SELECT string_agg(DISTINCT tableoid::regclass::text, ',') FROM condition_history`); got != "condition_history_legacy" {
		t.Fatalf("this week's rows are in %q, want condition_history_legacy", got)
	}
}

func TestPartitionsCreatedAheadAndRowsRouted(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	now := time.Now()
	week := 7 * 24 * time.Hour
	p := partitions.Policy{Interval: week, Ahead: 3}
	res, err := keeper(s).Maintain(ctx, p, now)
	if err != nil || res.Skipped {
		t.Fatalf("maintain: %+v %v", res, err)
	}
	for _, table := range []string{"condition_history", "status_history"} {
		ps := partitionsOf(t, s, table)
		tail := ps[len(ps)-1]
		if tail.To != nil || tail.From.Before(now.Add(3*week)) || tail.From.After(now.Add(4*week)) {
			t.Fatalf("%s tail starts at %v; want 3-4 weeks ahead of %v", table, tail.From, now)
		}
		for i := 1; i < len(ps); i++ {
			if !ps[i].From.Equal(*ps[i-1].To) {
				t.Fatalf("%s partitions not contiguous: %+v", table, ps)
			}
		}
	}
	// A second run (another replica, or the next tick) creates nothing.
	if res, err := keeper(s).Maintain(ctx, p, now); err != nil || len(res.Created) != 0 {
		t.Fatalf("second maintain: %+v %v", res, err)
	}
	// A replica holding the lock makes the others skip.
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(x'69726f6e70617274'::bigint)`); err != nil {
		t.Fatal(err)
	}
	if res, err := keeper(s).Maintain(ctx, p, now.Add(30*24*time.Hour)); err != nil || !res.Skipped || len(res.Created) != 0 {
		t.Fatalf("maintain while another replica holds the lock: %+v %v", res, err)
	}
	_ = tx.Rollback(ctx)
	conn.Release()

	id := newHistoryDevice(t, s, "site-a")
	// A row past every partition created ahead lands in the tail: the
	// insert never fails.
	pgtest.MustExec(t, url, `INSERT INTO status_history (device_id, status, reason, changed_at) VALUES ($1, 'AVAILABLE', 'Future', now() + interval '1 year')`, id)
	if got := pgtest.QueryString(t, url, `SELECT tableoid::regclass::text FROM status_history WHERE reason = 'Future'`); got != "status_history_tail" {
		t.Fatalf("row a year ahead is in %q, want status_history_tail", got)
	}
	if got := pgtest.QueryString(t, url, `SELECT tableoid::regclass::text FROM status_history WHERE reason <> 'Future'`); !strings.HasPrefix(got, "status_history_") || got == "status_history_tail" {
		t.Fatalf("today's row is in %q", got)
	}
	// When the hub catches up (a year later), the partitions split off the
	// tail take that row with them: nothing lost, nothing left in the tail.
	before := pgtest.Count(t, url, `SELECT count(*) FROM status_history`)
	res, err = keeper(s).Maintain(ctx, p, now.Add(366*24*time.Hour))
	if err != nil || len(res.Created) < 2*50 {
		t.Fatalf("catch-up: %d created, %v", len(res.Created), err)
	}
	if after := pgtest.Count(t, url, `SELECT count(*) FROM status_history`); after != before {
		t.Fatalf("rows %d → %d across the split", before, after)
	}
	if got := pgtest.QueryString(t, url, `SELECT tableoid::regclass::text FROM status_history WHERE reason = 'Future'`); got == "status_history_tail" {
		t.Fatal("row stayed in the tail after its partition was created")
	}
	// Inserts through the code path still work with the split tables.
	newHistoryDevice(t, s, "site-a")
}

func TestRetentionDropsOnlyWholeOldPartitions(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	day := 24 * time.Hour
	now := time.Now()
	p := partitions.Policy{Interval: day, Ahead: 10}
	if _, err := keeper(s).Maintain(ctx, p, now); err != nil {
		t.Fatal(err)
	}
	ps := partitionsOf(t, s, "status_history")
	// ps[0] legacy, ps[1..] daily partitions from next Monday.
	first, second := ps[1], ps[2]
	id := newHistoryDevice(t, s, "site-a") // a row in the legacy partition
	for _, at := range []time.Time{first.From.Add(time.Hour), second.From.Add(time.Hour), second.From.Add(20 * time.Hour)} {
		pgtest.MustExec(t, url, `INSERT INTO status_history (device_id, status, reason, changed_at) VALUES ($1, 'FAULTED', 'Test', $2)`, id, at)
	}
	// Retention cuts in the middle of the second partition: the legacy and
	// the first partitions go, the second stays whole (its row older than
	// the cutoff too).
	later := second.From.Add(12 * time.Hour).Add(2 * day)
	res, err := keeper(s).Maintain(ctx, partitions.Policy{Interval: day, Ahead: 10, Retention: 2 * day}, later)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"status_history_legacy": true, first.Name: true, "condition_history_legacy": true,
		strings.Replace(first.Name, "status_history", "condition_history", 1): true}
	if len(res.Dropped) != len(want) {
		t.Fatalf("dropped %v, want %v", res.Dropped, want)
	}
	for _, n := range res.Dropped {
		if !want[n] {
			t.Fatalf("dropped %v, want %v", res.Dropped, want)
		}
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM status_history`); n != 2 {
		t.Fatalf("status_history has %d rows after retention, want the second partition's 2", n)
	}
	h, err := s.HistoryHorizon(ctx)
	if err != nil || !h.Equal(*second.From) {
		t.Fatalf("horizon %v %v, want %v", h, err, second.From)
	}
	// As-of answers before the horizon are refused, not guessed.
	if _, _, err := s.ListDevices(ctx, store.DeviceFilter{Limit: 10, AsOf: second.From.Add(-time.Minute)}); !errors.Is(err, store.ErrHistoryExpired) {
		t.Fatalf("as of before the horizon: %v, want ErrHistoryExpired", err)
	}
	// Retention 0 keeps everything.
	if res, err := keeper(s).Maintain(ctx, partitions.Policy{Interval: day, Ahead: 10}, later.Add(365*day)); err != nil || len(res.Dropped) != 0 {
		t.Fatalf("retention 0 dropped %v (%v)", res.Dropped, err)
	}
}

// TestPartitionDDLAlongsideIngestFailsNothing splits partitions off the
// tail while two sites ingest and a quarantine is set: no batch, command
// or partition run may fail (no deadlock between the DDL and the writers).
func TestPartitionDDLAlongsideIngestFailsNothing(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	ids := []string{newHistoryDevice(t, s, "site-a"), newHistoryDevice(t, s, "site-b")}
	stop := make(chan struct{})
	errs := make(chan error, 3)
	for i, site := range []string{"site-a", "site-b"} {
		go func() {
			sess, err := s.OpenLink(ctx, store.LinkHello{Site: site, BootID: "b2", Replica: "r1"})
			if err != nil {
				errs <- err
				return
			}
			for seq := sess.LastSequence + 1; ; seq++ {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				now := time.Now().UTC()
				over := map[condition.Type]condition.Status{}
				if seq%2 == 0 {
					over[condition.ProvisioningHealthy] = condition.False
				}
				if _, err := s.ApplyBatch(ctx, site, sess.Epoch, store.Batch{Sequence: seq, Devices: []store.DeviceUpdate{
					{DeviceID: ids[i], Conditions: conds(now, over), ObservedTime: now}}}); err != nil {
					errs <- fmt.Errorf("%s batch %d: %w", site, seq, err)
					return
				}
				if seq%5 == 0 {
					if _, err := s.SetDesiredImpairment(ctx, ids[i], store.ImpairmentQuarantined, "op", "x", "operator-api"); err != nil {
						errs <- fmt.Errorf("%s quarantine: %w", site, err)
						return
					}
				}
			}
		}()
	}
	week := 7 * 24 * time.Hour
	now := time.Now()
	for i := 0; i < 15; i++ {
		if _, err := keeper(s).Maintain(ctx, partitions.Policy{Interval: week, Ahead: 1}, now.Add(time.Duration(i)*week)); err != nil {
			t.Errorf("partition run %d: %v", i, err)
		}
	}
	close(stop)
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestMigrationMovesExistingHistoryRows migrates to 00008, writes history
// the way the code does, then migrates on: the rows are all in the
// partitioned tables, ids continue, and the code's inserts work.
func TestMigrationMovesExistingHistoryRows(t *testing.T) {
	ctx := context.Background()
	url := pgtest.DatabaseAt(t, 8)
	pgtest.MustExec(t, url, `INSERT INTO sites (name) VALUES ('site-a');
		INSERT INTO devices (id, site) VALUES ('00000000-0000-0000-0000-000000000001', 'site-a');
		INSERT INTO status_history (device_id, status, reason, changed_at) VALUES
			('00000000-0000-0000-0000-000000000001', 'AVAILABLE', 'Old', now() - interval '400 days'),
			('00000000-0000-0000-0000-000000000001', 'FAULTED', 'Old', now() - interval '1 day');
		INSERT INTO condition_history (device_id, type, status, reason, last_transition_time, observed_time)
			VALUES ('00000000-0000-0000-0000-000000000001', 'Enrolled', 'True', 'Old', now(), now())`)
	if _, err := store.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	if got := pgtest.QueryString(t, url, `SELECT string_agg(id || ':' || status || ':' || tableoid::regclass::text, ',' ORDER BY id) FROM status_history`); got != "1:AVAILABLE:status_history_legacy,2:FAULTED:status_history_legacy" {
		t.Fatalf("status_history after migration: %q", got)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM condition_history`); n != 1 {
		t.Fatalf("condition_history rows %d, want 1", n)
	}
	s, err := store.Open(ctx, url, testlog.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	newHistoryDevice(t, s, "site-a")
	if n := pgtest.Count(t, url, `SELECT min(id) FROM status_history WHERE reason <> 'Old'`); n != 3 {
		t.Fatalf("first new status_history id %d, want 3", n)
	}
}

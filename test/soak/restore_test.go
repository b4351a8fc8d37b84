package soak

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/tcpproxy"
	"github.com/ironlink/ironlink/test/harness"
)

// TestRestoreDumpTakenMidRun follows docs/howto/backup-restore.md: a
// pg_dump -Fc taken while a site churns and commands are applied, the site
// changing on after it; the hub stopped, the dump restored with pg_restore
// into a new database, a hub started on it and the satellite restarted
// without its state file. Then the restored hub's conditions equal the
// simulator's, every stored status is the derivation of them, and the
// restored hub recorded no transition that did not happen: every
// condition_history and status_history row written after the restore holds
// a value the original hub recorded after the dump (the site really went
// through it), and no row repeats the one before it.
func TestRestoreDumpTakenMidRun(t *testing.T) {
	bg := context.Background()
	db1 := pgtest.NewDatabase(t)
	pool1 := harness.Pool(t, db1)
	hub1 := harness.StartHub(t, bins, db1, "hub-1", hubFlags...)
	lb, err := tcpproxy.New("127.0.0.1:0", []string{hub1.Addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	s := newSite(t, "restore", 30)
	s.startSatellite(t, lb.Addr(), "--resync-interval", "10s")
	waitDevices(t, pool1, s, 60*time.Second)
	s.churn(300 * time.Millisecond)
	fc := harness.Fleet(t, hub1.Addr)
	nodes := s.sim.Nodes()
	for _, n := range nodes[:3] {
		ctx, cancel := context.WithTimeout(bg, 5*time.Second)
		_, err := fc.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: n.UUID, Reason: "restore test"})
		cancel()
		if err != nil {
			t.Fatalf("quarantine %s: %v", n.UUID, err)
		}
	}
	harness.Eventually(t, 60*time.Second, func() error { return commandsDone(bg, pool1) })

	dump := filepath.Join(t.TempDir(), "ironlink.dump")
	if out, err := exec.Command("pg_dump", "-Fc", "-d", db1, "-f", dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	t.Log("pg_dump taken mid-run")
	// The site changes on after the dump; the original hub records it.
	seq := lastSequence(t, pool1, s.name)
	harness.Eventually(t, 60*time.Second, func() error {
		if n := lastSequence(t, pool1, s.name); n < seq+10 {
			return fmt.Errorf("hub committed batch %d, want ≥ %d", n, seq+10)
		}
		return nil
	})
	s.stopChurn()
	harness.Eventually(t, 60*time.Second, func() error { return truthDiff(bg, pool1, s) })

	// Restore, as the how-to says: hubs stopped, a new database, the
	// satellite restarted without its state file.
	hub1.Stop(10 * time.Second)
	s.mu.Lock()
	s.sat.Stop(10 * time.Second)
	s.mu.Unlock()
	if err := os.Remove(s.stateFile); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	db2 := pgtest.NewDatabase(t)
	if out, err := exec.Command("pg_restore", "--no-owner", "-d", db2, dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}
	pool2 := harness.Pool(t, db2)
	for _, table := range []string{"condition_history", "status_history"} {
		if a, b := partitions(t, pool1, table), partitions(t, pool2, table); !slices.Equal(a, b) {
			t.Errorf("%s: partitions %v in the dumped database, %v restored", table, a, b)
		}
	}
	condMark, statusMark := maxID(t, pool2, "condition_history"), maxID(t, pool2, "status_history")
	hub2 := harness.StartHub(t, bins, db2, "hub-2", hubFlags...)
	lb.SetBackends([]string{hub2.Addr})
	s.restart(t)

	harness.Eventually(t, 90*time.Second, func() error { return truthDiff(bg, pool2, s) })
	harness.Eventually(t, 30*time.Second, func() error { return commandsDone(bg, pool2) })
	chk := newChecker(pool2, []*site{s}, 30*time.Second, time.Minute)
	harness.Eventually(t, 30*time.Second, func() error {
		if err := chk.traits(bg, false); err != nil {
			return err
		}
		if len(chk.mismatch) > 0 {
			return fmt.Errorf("%d traits differ from the restored desired state", len(chk.mismatch))
		}
		return nil
	})
	if err := chk.statuses(bg); err != nil {
		t.Fatal(err)
	}
	if err := chk.historyRepeats(bg); err != nil {
		t.Fatal(err)
	}
	for inv, v := range chk.violations {
		for _, x := range v {
			t.Errorf("%s: %s", inv, x)
		}
	}
	checkNoFalseTransitions(t, pool1, pool2, "condition_history", "device_id::text || '/' || type || '/' || status || '/' || reason || '/' || message", condMark)
	checkNoFalseTransitions(t, pool1, pool2, "status_history", "device_id::text || '/' || status", statusMark)
	checkNoRepeatedStatus(t, pool2)
}

// partitions lists table's partitions with their bounds.
func partitions(t *testing.T, pool *pgxpool.Pool, table string) []string {
	rows, err := pool.Query(context.Background(), `SELECT c.relname || ' ' || pg_get_expr(c.relpartbound, c.oid)
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass ORDER BY 1`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		t.Fatalf("%s has no partitions", table)
	}
	return out
}

func lastSequence(t *testing.T, pool *pgxpool.Pool, site string) int64 {
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT last_sequence FROM sites WHERE name = $1`, site).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func maxID(t *testing.T, pool *pgxpool.Pool, table string) int64 {
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(max(id), 0) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkNoFalseTransitions fails when a row the restored hub wrote to table
// (id > mark) holds a value (key) the original hub did not record after the
// dump: a transition the site never went through.
func checkNoFalseTransitions(t *testing.T, orig, restored *pgxpool.Pool, table, key string, mark int64) {
	t.Helper()
	keys := func(pool *pgxpool.Pool) []string {
		rows, err := pool.Query(context.Background(), `SELECT `+key+` FROM `+table+` WHERE id > $1 ORDER BY id`, mark)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			out = append(out, k)
		}
		return out
	}
	happened, written := keys(orig), keys(restored)
	for _, k := range written {
		if !slices.Contains(happened, k) {
			t.Errorf("%s: the restored hub recorded %s, which the site never went through after the dump", table, k)
		}
	}
	t.Logf("%s: %d rows after the dump at the original hub, %d written by the restored hub", table, len(happened), len(written))
}

// checkNoRepeatedStatus fails when two consecutive status_history rows of
// a device say the same status.
func checkNoRepeatedStatus(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM (
		SELECT status, lag(status) OVER (PARTITION BY device_id ORDER BY id) AS prev FROM status_history) x
		WHERE status = prev`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		t.Errorf("status_history holds %d rows that repeat the status before them", n)
	}
}

package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

// groupSats returns n scripted sites sending deltas as fast as acks allow,
// so that a replica's group commits always carry many sites' batches.
func groupSats(t *testing.T, prefix, addr string, n int) []*satsim.Sat {
	sats := make([]*satsim.Sat, n)
	for i := range sats {
		sats[i] = satsim.New(satsim.Config{Site: fmt.Sprintf("%s-%02d", prefix, i), Addr: addr, Devices: 40, DevicesPerBatch: 10, Window: 4, Logf: t.Logf})
	}
	runSats(t, sats...)
	for _, s := range sats {
		s.Produce(true)
	}
	return sats
}

// waitGroupInFlight polls pg_stat_activity until a hub backend is inside
// a group commit's transaction (running, or between, the statements of
// hub/store's group apply) and returns how many such backends it saw; it
// fails the test when none appears within timeout.
func waitGroupInFlight(t *testing.T, pool *pgxpool.Pool, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var n int
		err := pool.QueryRow(context.Background(), `
			SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL
			  AND state IN ('active', 'idle in transaction')
			  AND (query LIKE '%unnest(%' OR query LIKE '%FOR NO KEY UPDATE%')`).Scan(&n)
		if err == nil && n > 0 {
			return n
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no group commit transaction seen in flight within %s", timeout)
	return 0
}

// allOn waits until every sat has a link on replica.
func allOn(t *testing.T, replica string, timeout time.Duration, sats ...*satsim.Sat) {
	t.Helper()
	harness.Eventually(t, timeout, func() error {
		for _, s := range sats {
			if st := s.Stats(); !st.Connected || st.Replicas[replica] == 0 {
				return errorf("site %s: connected=%v, links by replica %v", s.Site(), st.Connected, st.Replicas)
			}
		}
		return nil
	})
}

// TestKillHubMidGroup kills (SIGKILL) the replica holding 20 busy links
// while one of its group commits is inside its transaction. The links
// resume on the other replica: every batch acked before the kill is
// committed, every batch of the killed group is either committed and
// recognised as a duplicate or sent again, and every delta sent ends as
// exactly one condition_history row, with every site's sequence at its last
// batch.
func TestKillHubMidGroup(t *testing.T) { repeat(t, scenarioKillHubMidGroup) }

func scenarioKillHubMidGroup(t *testing.T) {
	db, pool := newDatabase(t)
	a := startHub(t, db, "hub-a", "--log-level", "info")
	b := startHub(t, db, "hub-b", "--log-level", "info")
	lb := newProxy(t, a.Addr) // every link starts on hub-a
	sats := groupSats(t, "killgroup", lb.Addr(), 20)
	allOn(t, "hub-a", 30*time.Second, sats...)
	flowing(t, pool, nil, sats...)
	lb.SetBackends([]string{b.Addr})

	for kill := 1; kill <= 2; kill++ {
		n := waitGroupInFlight(t, pool, 20*time.Second)
		var acked uint64
		for _, s := range sats {
			acked += s.Stats().LastAcked
		}
		a.Kill()
		t.Logf("kill %d: hub-a killed with %d group transaction(s) in flight (%d batches acked so far)", kill, n, acked)
		allOn(t, "hub-b", 30*time.Second, sats...)
		if kill == 2 {
			break
		}
		// hub-a again, and every link back on it, for the second kill.
		a = harness.StartHubAt(t, bins, a.Addr, db, "hub-a", fastHub("--log-level", "info")...)
		lb.SetBackends([]string{a.Addr})
		b.Kill()
		b = harness.StartHubAt(t, bins, b.Addr, db, "hub-b", fastHub("--log-level", "info")...)
		allOn(t, "hub-a", 30*time.Second, sats...)
		// allOn counts links ever made on hub-a; wait for the live ones.
		harness.Eventually(t, 30*time.Second, func() error {
			if n := sitesOn(pool, "hub-a"); n != len(sats) {
				return errorf("%d of %d sites on hub-a", n, len(sats))
			}
			return nil
		})
		flowing(t, pool, nil, sats...)
		lb.SetBackends([]string{b.Addr})
	}
	verifyGroup(t, pool, sats)
}

// TestPostgresRestartMidGroup stops PostgreSQL (pg_ctl -m fast, which
// aborts every open transaction) while a group commit is inside its
// transaction, under 20 busy links on two replicas, keeps it down for 2 s
// and starts it again. The hubs stay up, the links resume, the aborted
// group's batches are sent again and committed once: every delta is exactly
// one history row and every site's sequence ends at its last batch.
func TestPostgresRestartMidGroup(t *testing.T) { repeat(t, scenarioPGRestartMidGroup) }

func scenarioPGRestartMidGroup(t *testing.T) {
	pg := pgtest.StartCluster(t)
	db := pg.NewDatabase(t, "ironlink")
	pool := harness.Pool(t, db)
	a := startHub(t, db, "hub-a", "--log-level", "info")
	b := startHub(t, db, "hub-b", "--log-level", "info")
	lb := newProxy(t, a.Addr, b.Addr)
	sats := groupSats(t, "pggroup", lb.Addr(), 20)
	harness.Eventually(t, 30*time.Second, func() error {
		for _, s := range sats {
			if st := s.Stats(); !st.Connected || st.LastAcked < 5 {
				return errorf("site %s: connected=%v acked %d", s.Site(), st.Connected, st.LastAcked)
			}
		}
		return nil
	})

	n := waitGroupInFlight(t, pool, 20*time.Second)
	before := map[string]uint64{}
	for _, s := range sats {
		before[s.Site()] = s.Stats().LastSent
	}
	pg.Stop(t)
	t.Logf("PostgreSQL stopped with %d group transaction(s) in flight", n)
	time.Sleep(2 * time.Second)
	pg.Start(t)
	t.Log("PostgreSQL started again")

	harness.Eventually(t, 60*time.Second, func() error {
		if a.Exited() || b.Exited() {
			t.Fatalf("a hub exited during the PostgreSQL restart: hub-a %v, hub-b %v", a.ExitErr(), b.ExitErr())
		}
		for _, s := range sats {
			if st := s.Stats(); !st.Connected || st.LastAcked <= before[s.Site()] {
				return errorf("site %s: connected=%v acked %d (sent before the stop %d)", s.Site(), st.Connected, st.LastAcked, before[s.Site()])
			}
		}
		return nil
	})
	verifyGroup(t, pool, sats)
}

// verifyGroup lets traffic flow after the last fault, then checks every
// scripted site exactly (drainAndVerify) and the history for repeats.
func verifyGroup(t *testing.T, pool *pgxpool.Pool, sats []*satsim.Sat) {
	t.Helper()
	flowing(t, pool, nil, sats...)
	drainAndVerify(t, pool, 60*time.Second, sats...)
	checkHistory(t, pool)
	var links, deltas, dups int
	for _, s := range sats {
		st := s.Stats()
		links, deltas, dups = links+st.Links, deltas+st.AckedDeltas, dups+st.DupAcks
	}
	t.Logf("%d scripted sites: %d links, %d acked deltas, %d duplicate acks", len(sats), links, deltas, dups)
}

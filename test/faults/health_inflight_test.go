package faults

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/test/harness"
)

// TestHealthReportInFlightWhenLinkCut loses the link while a health
// report is in flight: the satellite has sent it and the hub is inside its
// transaction (held on the site's row, locked by the test), not yet
// answered. Two ways:
//
//   - cut: the link is cut (tcpproxy.Cut) while the hub waits, then the
//     lock released: the hub's transaction ends with the link, uncommitted;
//   - answer lost: the link is frozen (tcpproxy.Freeze), the lock
//     released, the hub commits and answers into the frozen link; then the
//     link is cut and thawed: the answer never arrives.
//
// Either way the link comes back, the satellite sends the report again,
// the event is committed exactly once (one health_event_ids row, one
// condition_history row), the device is FAULTED naming the check, and the
// local caller gets success.
func TestHealthReportInFlightWhenLinkCut(t *testing.T) {
	t.Run("cut", func(t *testing.T) { healthInFlight(t, "health-cut", false) })
	t.Run("answer lost", func(t *testing.T) { healthInFlight(t, "health-lost", true) })
}

func healthInFlight(t *testing.T, name string, answerLost bool) {
	hs := startHealthSite(t, name, 3, healthSiteOptions{proxy: true})
	node := hs.site.sim.Nodes()[0]
	pool := harness.Pool(t, hs.db)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	committed := func() (ids, rows int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM health_event_ids WHERE site = $1`, hs.site.name).Scan(&ids); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM condition_history WHERE device_id = $1 AND health IS NOT NULL`, node.UUID).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		return ids, rows
	}

	// Hold the site's row so that the hub's ReportHealth transaction
	// (SELECT … FOR NO KEY UPDATE on it, hub/store/healthingest.go) waits.
	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(context.Background()) }()
	if _, err := lock.Exec(ctx, `SELECT 1 FROM sites WHERE name = $1 FOR UPDATE`, hs.site.name); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- report(ctx, hs.door, xid(node.Name, "79", true)) }()
	waitHealthTxBlocked(t, ctx, pool)
	notYet := func(when string) {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("the door answered (%v) %s", err, when)
		case <-time.After(time.Second):
		}
	}
	accepted := hs.proxy.Accepted()
	if answerLost {
		hs.proxy.Freeze()
		if err := lock.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, func() error {
			if ids, _ := committed(); ids != 1 {
				return errorf("the hub has not committed the event behind the frozen link (%d ids)", ids)
			}
			return nil
		})
		notYet("with the hub's answer held in the frozen link")
		hs.proxy.Cut()
		hs.proxy.Thaw()
	} else {
		hs.proxy.Cut()
		notYet("before the hub committed")
		if err := lock.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("report in flight when the link was lost: %v, want success", err)
		}
	case <-ctx.Done():
		t.Fatal("the door never answered the report in flight")
	}
	if hs.proxy.Accepted() <= accepted {
		t.Errorf("the proxy accepted no new connection after the cut: the report was answered on the old link?")
	}
	if ids, rows := committed(); ids != 1 || rows != 1 {
		t.Errorf("health_event_ids %d, health history rows %d: want 1 and 1 (committed once)", ids, rows)
	}
	d := device(t, harness.Fleet(t, hs.hub.Addr), node.UUID)
	if d.GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED || !strings.Contains(d.GetStatusReason(), "GpuXidError") {
		t.Errorf("after the report: %v (%q), want FAULTED naming GpuXidError", d.GetStatus(), d.GetStatusReason())
	}
}

// waitHealthTxBlocked waits until a hub's ReportHealth transaction waits
// for a lock on its site's row.
func waitHealthTxBlocked(t *testing.T, ctx context.Context, pool *pgxpool.Pool) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, func() error {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
			AND query LIKE 'SELECT 1 FROM sites WHERE name = $1 FOR NO KEY UPDATE%'`).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return errorf("the hub's ReportHealth is not waiting on the site's row")
		}
		return nil
	})
}

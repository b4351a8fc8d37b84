package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

// TestPostgresAtMaxConnections takes every connection slot of PostgreSQL
// (max_connections 40, a private cluster) away from a running hub: other
// clients fill the slots and the hub's sessions are terminated, so the hub
// can neither keep nor open a connection. The hub must not exit; /readyz
// turns 503 saying why ("too many clients"), an operator's quarantine is
// refused as unavailable, and the hub logs the condition a bounded number
// of times: under five satellite links, one error line "database failed"
// for the outage, not one per link. Once the slots are freed the hub recovers by itself: ready,
// the satellite's deltas committed exactly once, the refused quarantine
// accepted on retry and applied.
func TestPostgresAtMaxConnections(t *testing.T) { repeat(t, scenarioPGMaxConns) }

func scenarioPGMaxConns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pg := pgtest.StartCluster(t)
	pg.SetMaxConnections(t, 40)
	db := pg.NewDatabase(t, "ironlink")
	pool := harness.Pool(t, db)
	a := harness.StartHub(t, bins, db, "hub-a", fastHub()...)
	fc := harness.Fleet(t, a.Addr)
	// Five links: a database outage must cost one error line, not one
	// per link.
	var sats []*satsim.Sat
	for i := range 5 {
		sats = append(sats, satsim.New(satsim.Config{Site: fmt.Sprintf("maxconns-%d", i), Addr: a.Addr, Devices: 20, DevicesPerBatch: 5, Window: 4, Logf: t.Logf}))
	}
	sat := sats[0]
	runSats(t, sats...)
	for _, s := range sats {
		s.Produce(true)
	}
	flowing(t, pool, nil, sats...)
	pool.Close() // the test's own pool would hold slots too
	probe := watchReady(ctx, a.AdminAddr)

	logFrom := len(strings.Split(a.Output(), "\n"))
	fillers := fillSlots(t, pg.URL("ironlink"))
	t.Logf("%d filler sessions hold every slot; the hub has none", len(fillers))
	probe.waitFor(t, false, 30*time.Second)
	harness.Eventually(t, 10*time.Second, func() error {
		if _, body := probe.last(); !strings.Contains(body, "too many clients") && !strings.Contains(body, "reserved") {
			return errorf("/readyz says %q, want the reason (too many clients)", body)
		}
		return nil
	})
	_, body := probe.last()
	t.Logf("at max_connections: /readyz %q", body)
	var dev string
	harness.Eventually(t, 10*time.Second, func() error {
		var err error
		dev, err = anyDevice(fillers[0], sat.Site())
		return err
	})
	qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := fc.QuarantineDevice(qctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: dev, Reason: "at max_connections"})
	qcancel()
	if err == nil {
		t.Error("a quarantine was accepted while the hub had no database connection")
	} else {
		t.Logf("quarantine at max_connections: %v", err)
	}
	time.Sleep(2 * time.Second) // a few health checks, link retries and sweeps fail meanwhile

	for _, c := range fillers {
		c.Close(context.Background())
	}
	freed := time.Now()
	probe.waitFor(t, true, 30*time.Second)
	t.Logf("ready again %s after the slots were freed", time.Since(freed).Round(time.Millisecond))
	if a.Exited() {
		t.Fatalf("the hub exited at max_connections: %v", a.ExitErr())
	}
	pool = harness.Pool(t, db)
	flowing(t, pool, nil, sats...)
	q := quarantine(t, fc, dev, "after max_connections", 10*time.Second)
	waitCommand(t, fc, q, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 15*time.Second)
	drainAndVerify(t, pool, 30*time.Second, sats...)
	noisy, summary := warnings(a.Output(), logFrom)
	dbErrors, sweepWarnings := 0, 0
	for _, l := range strings.Split(a.Output(), "\n")[logFrom:] {
		if strings.Contains(l, "level=ERROR") && strings.Contains(l, "database failed") {
			dbErrors++
		}
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "due commands") {
			sweepWarnings++
		}
	}
	if dbErrors > 1 {
		t.Errorf("%d error lines \"database failed\" for one outage under %d links, want at most 1 (the others at debug)", dbErrors, len(sats))
	}
	if sweepWarnings > 2 {
		t.Errorf("%d warning lines about due commands for one outage under %d links, want at most 2 (one a minute for \"look for\" and for \"load\"; the others at debug)", sweepWarnings, len(sats))
	}
	t.Logf("hub warnings and errors logged at max_connections and after: %d\n%s", noisy, summary)
	// 40 for the hub's own state changes, plus a few per link that the
	// outage ends (its close, its group of writes committed one by one).
	if limit := 40 + 8*(len(sats)-1); noisy > limit {
		t.Errorf("%d warning/error lines, want at most %d (one per state change, not per query)", noisy, limit)
	}
}

// fillSlots opens sessions to url until PostgreSQL refuses one for want of
// slots (53300), terminating every other client session of the database
// (the hub's) after each round, until the fillers hold every slot and no
// other client session is left. It returns the fillers (closed at test end).
func fillSlots(t *testing.T, url string) []*pgx.Conn {
	t.Helper()
	var fillers []*pgx.Conn
	t.Cleanup(func() {
		for _, c := range fillers {
			c.Close(context.Background())
		}
	})
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = "filler"
	deadline := time.Now().Add(30 * time.Second)
	for {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err := pgx.ConnectConfig(ctx, cfg)
			cancel()
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "53300" {
				break
			}
			if err != nil {
				t.Fatalf("filler: %v", err)
			}
			fillers = append(fillers, c)
		}
		if len(fillers) == 0 {
			t.Fatal("no filler session could connect")
		}
		var others int
		if err := fillers[0].QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE backend_type = 'client backend' AND application_name <> 'filler' AND pid <> pg_backend_pid()`).Scan(&others); err != nil {
			t.Fatal(err)
		}
		if others == 0 {
			return fillers
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hub still had %d sessions after 30 s of filling", others)
		}
		time.Sleep(50 * time.Millisecond) // let the terminated sessions end
	}
}

// anyDevice returns the id of one of the site's devices, read on c.
func anyDevice(c *pgx.Conn, site string) (string, error) {
	var id string
	err := c.QueryRow(context.Background(), `SELECT id::text FROM devices WHERE site = $1 LIMIT 1`, site).Scan(&id)
	return id, err
}

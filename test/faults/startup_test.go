package faults

import (
	"context"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

// waitingLine is what a hub logs for each try while PostgreSQL does not
// answer at start (hub/app/dbwait.go).
const waitingLine = "PostgreSQL does not answer at start"

// TestHubStartedBeforePostgres starts a hub while its PostgreSQL (a private
// cluster) is stopped: the hub must not exit; it logs that it waits, with
// the cause, once per try (at a growing delay), and serves nothing. Once
// PostgreSQL is started it becomes ready by itself and a satellite's
// deltas are committed exactly once.
func TestHubStartedBeforePostgres(t *testing.T) { repeat(t, scenarioStartBeforePG) }

func scenarioStartBeforePG(t *testing.T) {
	pg := pgtest.StartCluster(t)
	db := pg.NewDatabase(t, "ironlink")
	pg.Stop(t)
	hub := startWaitingHub(t, db, "connect")
	pg.Start(t)
	readyAfterWait(t, hub, db)
}

// TestHubStartedAtMaxConnections starts a hub while every connection slot
// of its PostgreSQL is taken (max_connections 40): the hub waits, logging
// "too many clients" once per try, and becomes ready once the slots are
// freed.
func TestHubStartedAtMaxConnections(t *testing.T) { repeat(t, scenarioStartAtMaxConns) }

func scenarioStartAtMaxConns(t *testing.T) {
	pg := pgtest.StartCluster(t)
	pg.SetMaxConnections(t, 40)
	db := pg.NewDatabase(t, "ironlink")
	fillers := fillSlots(t, pg.URL("ironlink"))
	t.Logf("%d filler sessions hold every slot", len(fillers))
	hub := startWaitingHub(t, db, "too many clients")
	for _, c := range fillers {
		c.Close(context.Background())
	}
	readyAfterWait(t, hub, db)
}

// startWaitingHub starts a hub over db (whose PostgreSQL does not answer)
// and checks that it waits: two waiting lines naming cause, no exit, its
// gRPC port not serving.
func startWaitingHub(t *testing.T, db, cause string) *harness.Hub {
	t.Helper()
	addr, admin := harness.FreeAddr(t), harness.FreeAddr(t)
	args := append([]string{"--database-url", db, "--listen", addr, "--replica", "hub-a", "--no-auth", "--plaintext",
		"--admin-addr", admin}, fastHub()...)
	p := harness.Start(t, "hub hub-a", bins.Hub(), args...)
	lines := waitLogLines(t, p, waitingLine, 1, 30*time.Second)
	t.Logf("while PostgreSQL does not answer: %s", lines[len(lines)-1])
	for _, l := range lines {
		if !strings.Contains(l, cause) {
			t.Errorf("waiting line does not name the cause %q: %s", cause, l)
		}
	}
	if p.Exited() {
		t.Fatalf("hub exited while PostgreSQL did not answer: %v", p.ExitErr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if r, err := healthpb.NewHealthClient(harness.Dial(t, addr)).Check(ctx, &healthpb.HealthCheckRequest{}); err == nil {
		t.Errorf("hub health %v while PostgreSQL does not answer, want no answer", r.GetStatus())
	}
	return &harness.Hub{Proc: p, Addr: addr, Replica: "hub-a", AdminAddr: admin}
}

// readyAfterWait checks that hub becomes SERVING once PostgreSQL answers,
// logged so, and that a scripted satellite's deltas are committed.
func readyAfterWait(t *testing.T, hub *harness.Hub, db string) {
	t.Helper()
	start := time.Now()
	hc := healthpb.NewHealthClient(harness.Dial(t, hub.Addr))
	harness.Eventually(t, 60*time.Second, func() error {
		if hub.Exited() {
			t.Fatalf("hub exited: %v\n%s", hub.ExitErr(), harness.Tail(hub.Output(), 20))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		if r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return errorf("health %v", r.GetStatus())
		}
		return nil
	})
	t.Logf("hub serving %s after PostgreSQL answered (%d waiting lines)", time.Since(start).Round(100*time.Millisecond), hub.Count(waitingLine))
	if hub.Count("PostgreSQL answers: start continues") == 0 {
		t.Errorf("no line says the start continues:\n%s", harness.Tail(hub.Output(), 10))
	}
	pool := harness.Pool(t, db)
	sat := satsim.New(satsim.Config{Site: "late-db", Addr: hub.Addr, Devices: 20, DevicesPerBatch: 5, Window: 4, Logf: t.Logf})
	runSats(t, sat)
	sat.Produce(true)
	flowing(t, pool, nil, sat)
	drainAndVerify(t, pool, 30*time.Second, sat)
}

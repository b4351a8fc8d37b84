package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

// frozenFor is how long the replica stays stopped: past the satellites'
// keepalive detection (gRPC's 10 s floor + 2 s timeout) with room for
// the links to move and commit on the other replica, and past the policy
// lead's worst case (leadBound in the scenario).
const frozenFor = 32 * time.Second

// TestFrozenReplica stops the replica holding 10 busy scripted links
// (SIGSTOP) while one of its group commits is inside its transaction, as a
// VM paused or a process stalled in swap would. The balancer sends new
// connections to the other replica (as a readiness probe would); the
// satellites notice the dead link by their keepalive and their links move.
// After frozenFor the replica is continued (SIGCONT): it must not exit,
// every write it still had in flight is refused (fenced by the newer
// links), and every delta sent ends as exactly one history row. The time
// for the links to move is printed.
func TestFrozenReplica(t *testing.T) { repeat(t, scenarioFrozenReplica) }

func scenarioFrozenReplica(t *testing.T) {
	db, pool := newDatabase(t)
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte(failoverPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startHub(t, db, "hub-a", "--log-level", "info", "--policy-file", policy, "--policy-interval", "1s")
	leading(t, a, 1, 10*time.Second) // started first, hub-a evaluates the policy
	b := startHub(t, db, "hub-b", "--log-level", "info", "--policy-file", policy, "--policy-interval", "1s")
	lb := newProxy(t, a.Addr) // every link starts on hub-a
	dial := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 2 * time.Second, Timeout: 2 * time.Second, PermitWithoutStream: true})}
	sats := make([]*satsim.Sat, 10)
	for i := range sats {
		sats[i] = satsim.New(satsim.Config{Site: fmt.Sprintf("frozen-%02d", i), Addr: lb.Addr(), Devices: 40, DevicesPerBatch: 10,
			Window: 4, Logf: t.Logf, DialOptions: dial})
	}
	runSats(t, sats...)
	for _, s := range sats {
		s.Produce(true)
	}
	allOn(t, "hub-a", 30*time.Second, sats...)
	flowing(t, pool, nil, sats...)
	lb.SetBackends([]string{b.Addr})

	n := waitGroupInFlight(t, pool, 20*time.Second)
	pid := a.Pid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cont := func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
	t.Cleanup(cont)
	frozen := time.Now()
	t.Logf("hub-a stopped (SIGSTOP) with %d group transaction(s) in flight", n)
	// The evaluator's lock is held in a transaction that PostgreSQL ends
	// after idle_in_transaction_session_timeout (10 s): hub-b must take
	// the lead within that plus two policy intervals and slack (a loaded
	// machine). Twice that timeout at worst: a statement of the frozen
	// replica that was waiting for a lock its own frozen group holds runs
	// once that group's session is ended (10 s), and only then does its
	// transaction turn idle and its own 10 s start (seen once in 20.1 s,
	// at load 4, against a bound of 20 s).
	leadBound := 2*10*time.Second + 2*time.Second + 4*time.Second
	if err := harness.Within(leadBound, func() error {
		if v := evaluatorLeading(b); v != 1 {
			return errorf("hub-b's ironlink_policy_evaluator_leading is %d %s after the freeze", v, time.Since(frozen).Round(100*time.Millisecond))
		}
		return nil
	}); err != nil {
		t.Errorf("%v: the frozen replica kept the policy evaluator's lead", err)
	} else {
		t.Logf("hub-b leads the policy evaluator %s after the freeze (bound %s)", time.Since(frozen).Round(100*time.Millisecond), leadBound)
	}
	if err := harness.Within(frozenFor, func() error {
		if m := sitesOn(pool, "hub-b"); m != len(sats) {
			return errorf("%d of %d sites on hub-b %s after the freeze", m, len(sats), time.Since(frozen).Round(100*time.Millisecond))
		}
		return nil
	}); err != nil {
		t.Errorf("%v; link errors of %s: %v; hub-b's sessions waiting: %v", err, sats[0].Site(), lastN(sats[0].LinkErrors(), 3), waitingSessions(pool))
		t.Fatalf("hub-b's log:\n%s", harness.Tail(b.Output(), 15))
	}
	t.Logf("every link moved to hub-b %s after the freeze", time.Since(frozen).Round(100*time.Millisecond))
	flowing(t, pool, nil, sats...)
	time.Sleep(time.Until(frozen.Add(frozenFor))) // the freeze lasts frozenFor, whatever the links did
	logFrom := len(a.Output())
	cont()
	t.Logf("hub-a continued (SIGCONT) after %s", time.Since(frozen).Round(100*time.Millisecond))
	flowing(t, pool, nil, sats...)
	if a.Exited() {
		t.Fatalf("hub-a exited after SIGCONT: %v\n%s", a.ExitErr(), harness.Tail(a.Output(), 20))
	}
	if m := sitesOn(pool, "hub-b"); m != len(sats) {
		t.Errorf("%d of %d sites on hub-b after hub-a continued: the continued replica took links back", m, len(sats))
	}
	verifyGroup(t, pool, sats)
	// The continued replica's evaluator lost its lock (its transaction was
	// ended) and is fenced: it leads no more, the epoch is hub-b's, and
	// no decision of hub-a is recorded after it was stopped.
	leading(t, a, 0, 10*time.Second)
	if v := evaluatorLeading(b); v != 1 {
		t.Errorf("hub-b's ironlink_policy_evaluator_leading is %d after hub-a continued, want 1", v)
	}
	var holder string
	var epoch, stale int64
	if err := pool.QueryRow(context.Background(), `SELECT holder, epoch, (SELECT count(*) FROM policy_decisions WHERE replica = 'hub-a' AND decided_at > $1)
		FROM policy_leader`, frozen).Scan(&holder, &epoch, &stale); err != nil {
		t.Fatal(err)
	}
	t.Logf("policy lead: %s at epoch %d; decisions recorded by hub-a after its freeze: %d; hub-a's evaluator after SIGCONT: %d lock-lost, %d fenced log lines",
		holder, epoch, stale, strings.Count(a.Output()[logFrom:], "policy evaluator lost its lock connection"), strings.Count(a.Output()[logFrom:], "policy pass refused"))
	if holder != "hub-b" || stale != 0 {
		t.Errorf("policy lead %s (epoch %d), %d decisions by hub-a after its freeze: want hub-b and none", holder, epoch, stale)
	}
	var after []string
	for _, l := range strings.Split(a.Output()[logFrom:], "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") || strings.Contains(l, "link ") {
			after = append(after, l)
		}
	}
	t.Logf("hub-a after SIGCONT (warnings, errors, links):\n%s", strings.Join(lastN(after, 12), "\n"))
}

// waitingSessions lists the database's sessions waiting for a lock (their
// query's start), for a failure's message.
func waitingSessions(pool *pgxpool.Pool) []string {
	rows, err := pool.Query(context.Background(), `SELECT left(query, 60) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock'`)
	if err != nil {
		return []string{err.Error()}
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return []string{err.Error()}
	}
	return out
}

// evaluatorLeading is h's ironlink_policy_evaluator_leading (-1 when its
// /metrics cannot be read or lacks it).
func evaluatorLeading(h *harness.Hub) int {
	r, err := http.Get("http://" + h.AdminAddr + "/metrics")
	if err != nil {
		return -1
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	prefix := "ironlink_policy_evaluator_leading{replica=\"" + h.Replica + "\"} "
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			if v == "1" {
				return 1
			}
			return 0
		}
	}
	return -1
}

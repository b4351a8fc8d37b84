package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

// TestPostgresFailover kills the PostgreSQL primary (SIGKILL of every
// process, as a host that dies) under a hub given the multi-host URL
// host=primary,standby target_session_attrs=read-write, while a real
// satellite churns, a scripted satellite sends deltas, commands and
// operations (three REBOOTs: two RUNNING at the satellite, one PENDING)
// are in flight, the policy evaluator leads and
// a WatchFleet consumer follows.
// The standby is synchronous and is promoted 3 s after the hub reports
// not ready. The hub must not exit; /readyz turns 503 naming the standby;
// once the standby is promoted the hub writes again with no restart,
// every delta acknowledged before the kill is in the history and nothing
// is in it twice, the commands finish, the reboots SUCCEED with each power
// request sent once (an operation asked while no primary answers is
// refused), a new quarantine succeeds at
// LISTEN/NOTIFY speed (sweep 30 s), the evaluator leads again and the
// feed continues with no gap and no repeat. The time from the kill to
// the first commit on the new primary is logged.
func TestPostgresFailover(t *testing.T) { repeat(t, scenarioPGFailover) }

// TestPostgresFailoverBehindService is the failover behind one address (a
// load balancer or Kubernetes service such as CloudNativePG's -rw, here
// internal/tcpproxy) that moves from the killed primary to the standby:
// the hub's URL names that one address and no target_session_attrs. The
// service moves before the promotion, so the hub first meets the standby
// read-only (/readyz 503 "standby", no write accepted), then the promoted
// primary, and resumes as above.
func TestPostgresFailoverBehindService(t *testing.T) { repeat(t, scenarioPGFailoverService) }

func scenarioPGFailover(t *testing.T) {
	pair := pgtest.StartPair(t, "ironlink", true)
	runFailover(t, pair, pair.URL("ironlink"), nil)
}

func scenarioPGFailoverService(t *testing.T) {
	pair := pgtest.StartPair(t, "ironlink", true)
	svc := newProxy(t, "127.0.0.1:"+pair.Primary.Port())
	url := strings.Replace(pair.Primary.URL("ironlink"), pair.Primary.Port(), portOf(svc.Addr()), 1)
	runFailover(t, pair, url, func() {
		// The service's endpoint moves to the standby before it is promoted.
		svc.SetBackends([]string{"127.0.0.1:" + pair.Standby.Port()})
		svc.Cut()
	})
}

func portOf(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }

// failoverPolicy makes the policy evaluator run (dry run): its advisory
// lock is one more session the failover must re-establish.
const failoverPolicy = `policy:
  default:
    enabled: true
    dryRun: true
    guard: {maxDevices: 5, maxPercent: 10, window: 1h}
    rules:
      - {name: offered-faulted, to: [FAULTED], reasons: [DeployFailed, CleanFailed], holdDown: 30s}
`

// runFailover is both failover scenarios: the hub on dbURL, pair's primary
// crashed, moved (when set) run after the crash, the standby promoted 3 s
// after the hub says it is not ready.
func runFailover(t *testing.T, pair *pgtest.Pair, dbURL string, moved func()) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := harness.Pool(t, pair.URL("ironlink")) // the test's own reads follow the primary
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte(failoverPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	a := harness.StartHub(t, bins, dbURL, "hub-a", fastHub("--command-sweep", "30s", "--policy-file", policy, "--policy-interval", "1s")...)
	fc := harness.Fleet(t, a.Addr)
	s := newSite(t, "failover", 40)
	s.startSatellite(t, "", s.via(t, a.Addr), opsSatArgs()...)
	ops := opsClient(t, a.Addr)
	sat := satsim.New(satsim.Config{Site: "failover-scripted", Addr: a.Addr, Devices: 40, DevicesPerBatch: 10, Window: 4, Logf: t.Logf})
	runSats(t, sat)
	feed := follow(ctx, t, fc, "")
	waitDevices(t, pool, s, 30*time.Second)
	ready := s.readyNodes()
	if len(ready) < 6 {
		t.Fatalf("need 6 ready nodes, have %d", len(ready))
	}
	// The reboots' nodes stay available: churn moved one to "deleting"
	// once, where a REBOOT cannot start (seen in a full run).
	s.sim.KeepFromChurn(ready[3:6]...)
	s.churn(t, 150*time.Millisecond)
	sat.Produce(true)
	for _, id := range ready[:3] {
		s.addNodeTrait(t, id)
	}
	q0 := quarantine(t, fc, ready[0], "fault suite: failover", 10*time.Second)
	waitCommand(t, fc, q0, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 15*time.Second)
	flowing(t, pool, []*site{s}, sat)
	leading(t, a, 1, 10*time.Second)

	probe := watchReady(ctx, a.AdminAddr)
	q1 := quarantine(t, fc, ready[1], "fault suite: failover", 10*time.Second) // in flight
	// Two reboots sent to the satellite (RUNNING: it reports their end
	// across the kill) and one still PENDING (delivered after it).
	reboots := startReboots(t, ops, s.name, ready[3:5])
	harness.Eventually(t, 10*time.Second, func() error {
		if st := opStates(t, ops, reboots); st != "RUNNING RUNNING" {
			return errorf("reboots %s, want both RUNNING", st)
		}
		return nil
	})
	reboots = append(reboots, startReboots(t, ops, s.name, ready[5:6])...)
	t.Logf("reboots at the kill: %s", opStates(t, ops, reboots))
	acked := sat.Stats().LastAcked
	logFrom := len(strings.Split(a.Output(), "\n"))
	killed := time.Now()
	pair.Crash(t)
	if moved != nil {
		moved()
	}
	notReady := probe.waitFor(t, false, 30*time.Second)
	harness.Eventually(t, 30*time.Second, func() error {
		if _, body := probe.last(); !strings.Contains(body, "standby") {
			return errorf("/readyz says %q, want the standby named", body)
		}
		return nil
	})
	if _, err := fc.QuarantineDevice(ctxTimeout(t, 3*time.Second), &ironlinkv1.QuarantineDeviceRequest{DeviceId: ready[2], Reason: "while no primary"}); err == nil {
		t.Error("a quarantine was accepted while no primary answered")
	}
	if _, err := ops.StartOperation(ctxTimeout(t, 3*time.Second), &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_REBOOT,
		Site: s.name, Devices: ready[2:3], Reason: "while no primary", Force: true}); err == nil {
		t.Error("an operation was accepted while no primary answered")
	}
	_, body := probe.last()
	t.Logf("no primary: /readyz %q", body)
	// No primary for a few seconds, as while an operator decides to
	// promote: links, commands, the evaluator and the feed retry meanwhile,
	// and the log must not grow with each retry.
	time.Sleep(3 * time.Second)

	promoting := time.Now()
	pair.Promote(t)
	promoted := time.Now()
	var seq0 int64
	harness.Eventually(t, 10*time.Second, func() error { // the test's pool drops its dead connections first
		return pool.QueryRow(ctx, `SELECT last_sequence FROM sites WHERE name = $1`, sat.Site()).Scan(&seq0)
	})
	if uint64(seq0) < acked {
		t.Fatalf("the promoted standby has sequence %d of the scripted site, %d were acknowledged before the kill", seq0, acked)
	}
	firstCommit := waitCommitAfter(t, pool, sat.Site(), seq0, 60*time.Second)
	readyAgain := probe.waitFor(t, true, 30*time.Second)
	if a.Exited() {
		t.Fatalf("the hub exited during the failover: %v", a.ExitErr())
	}
	t.Logf("failover: kill → /readyz 503 %s; kill → promote %s; promote (pg_ctl promote -w returned) → first commit %s; kill → first commit %s; kill → /readyz 200 %s",
		notReady.Sub(killed).Round(time.Millisecond), promoting.Sub(killed).Round(time.Millisecond),
		firstCommit.Sub(promoted).Round(time.Millisecond), firstCommit.Sub(killed).Round(time.Millisecond),
		readyAgain.Sub(killed).Round(time.Millisecond))

	waitCommand(t, fc, q1, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 30*time.Second)
	// The reboots started just before the kill end SUCCEEDED, each power
	// request sent once: what the satellite reported while no primary
	// answered is reported again, not redone.
	if checkRebootsOnce(t, waitOpsFinal(t, ops, reboots, 60*time.Second)) {
		t.Logf("%d reboots started before the kill SUCCEEDED, each power request sent once", len(reboots))
	}
	listening(t, pool, 1)
	asked := time.Now()
	q2 := quarantine(t, fc, ready[2], "fault suite: after failover", 5*time.Second)
	waitCommand(t, fc, q2, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 5*time.Second)
	t.Logf("quarantine after the failover succeeded in %s (command sweep 30 s)", time.Since(asked).Round(time.Millisecond))
	leading(t, a, 1, 10*time.Second)

	flowing(t, pool, []*site{s}, sat)
	s.stopChurn()
	drainAndVerify(t, pool, 30*time.Second, sat)
	s.verify(t, pool, 30*time.Second)
	checkFeedAfterFailover(ctx, t, fc, feed)
	noisy, summary := warnings(a.Output(), logFrom)
	t.Logf("hub warnings and errors logged from the kill to the end: %d\n%s", noisy, summary)
	if noisy > 30 {
		t.Errorf("%d warning/error lines for one failover, want at most 30 (one per state change, not per query)", noisy)
	}
}

var logMsg = regexp.MustCompile(`level=(WARN|ERROR) msg="([^"]*)"`)

// warnings counts the WARN and ERROR lines of a process's output from line
// from on, and lists them by message, most frequent first.
func warnings(out string, from int) (int, string) {
	lines := strings.Split(out, "\n")
	counts := map[string]int{}
	n := 0
	for _, l := range lines[min(from, len(lines)):] {
		if m := logMsg.FindStringSubmatch(l); m != nil {
			counts[m[1]+" "+m[2]]++
			n++
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return counts[keys[i]] > counts[keys[j]] || (counts[keys[i]] == counts[keys[j]] && keys[i] < keys[j])
	})
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %4d %s\n", counts[k], k)
	}
	return n, b.String()
}

// waitCommitAfter returns when the site's hub sequence first exceeded seq.
func waitCommitAfter(t *testing.T, pool *pgxpool.Pool, siteName string, seq int64, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var n int64
		err := pool.QueryRow(context.Background(), `SELECT last_sequence FROM sites WHERE name = $1`, siteName).Scan(&n)
		if err == nil && n > seq {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no commit for %s after sequence %d within %s (last %d, %v)", siteName, seq, timeout, n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leading waits until the hub's ironlink_policy_evaluator_leading is want.
func leading(t *testing.T, h *harness.Hub, want int, timeout time.Duration) {
	t.Helper()
	line := "ironlink_policy_evaluator_leading{replica=\"" + h.Replica + "\"} " + string(rune('0'+want))
	harness.Eventually(t, timeout, func() error {
		r, err := http.Get("http://" + h.AdminAddr + "/metrics")
		if err != nil {
			return err
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(b), line) {
			return errorf("no %q in /metrics", line)
		}
		return nil
	})
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// readyProbe polls a hub's /readyz every 50 ms and remembers when it
// changed.
type readyProbe struct {
	mu      sync.Mutex
	code    int
	body    string
	changes []readyChange
}

type readyChange struct {
	at    time.Time
	ready bool
}

func watchReady(ctx context.Context, adminAddr string) *readyProbe {
	p := &readyProbe{}
	c := &http.Client{Timeout: 3 * time.Second}
	go func() {
		for ctx.Err() == nil {
			code, body := 0, ""
			if r, err := c.Get("http://" + adminAddr + "/readyz"); err == nil {
				b, _ := io.ReadAll(r.Body)
				r.Body.Close()
				code, body = r.StatusCode, string(b)
			}
			p.mu.Lock()
			if code != 0 && (p.code == 0 || (code == 200) != (p.code == 200)) {
				p.changes = append(p.changes, readyChange{at: time.Now(), ready: code == 200})
			}
			if code != 0 {
				p.code, p.body = code, body
			}
			p.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return p
}

func (p *readyProbe) last() (int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code, p.body
}

// waitFor returns when /readyz last turned ready (or not).
func (p *readyProbe) waitFor(t *testing.T, ready bool, timeout time.Duration) time.Time {
	t.Helper()
	var at time.Time
	harness.Eventually(t, timeout, func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if n := len(p.changes); n > 0 && p.changes[n-1].ready == ready {
			at = p.changes[n-1].at
			return nil
		}
		return errorf("/readyz %d %q, want ready=%v", p.code, p.body, ready)
	})
	return at
}

// checkFeedAfterFailover resumes the consumer's WatchFleet stream (when the
// failover ended it) from the last cursor it received, lets the feed go
// quiet, and compares what the consumer got with the whole feed read
// afresh from its first cursor: the same events in the same order, no
// cursor twice.
func checkFeedAfterFailover(ctx context.Context, t *testing.T, fc ironlinkv1.FleetServiceClient, l *feedLog) {
	t.Helper()
	got, _ := l.snapshot()
	var rest *feedLog
	select {
	case <-l.done:
		cursor := l.first
		if len(got) > 0 {
			cursor = got[len(got)-1].GetCursor()
		}
		t.Logf("the WatchFleet stream ended in the failover (%v); resuming from its last cursor", l.err)
		rest = follow(ctx, t, fc, cursor)
	default:
		rest = l // it rode the failover
		got = nil
	}
	ref := follow(ctx, t, fc, l.first)
	var want, all []*ironlinkv1.WatchFleetResponse
	werr := harness.Within(30*time.Second, func() error {
		r, lastR := ref.snapshot()
		s, lastS := rest.snapshot()
		if time.Since(lastR) < 2*time.Second || time.Since(lastS) < 2*time.Second {
			return errorf("still streaming: %d and %d events", len(r), len(s))
		}
		all, want = append(append([]*ironlinkv1.WatchFleetResponse(nil), got...), s...), r
		if len(all) != len(want) {
			return errorf("the consumer has %d events, the feed read afresh %d", len(all), len(want))
		}
		return nil
	})
	if werr != nil {
		t.Fatal(werr)
	}
	seen := map[string]bool{}
	for k, m := range all {
		if feedKey(m) != feedKey(want[k]) {
			t.Fatalf("event %d: consumer %s, feed %s", k, feedKey(m), feedKey(want[k]))
		}
		if seen[m.GetCursor()] {
			t.Fatalf("cursor %s delivered twice", m.GetCursor())
		}
		seen[m.GetCursor()] = true
	}
	t.Logf("WatchFleet consumer: %d events, the same as the feed read afresh", len(all))
}

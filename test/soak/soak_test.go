//go:build soak

package soak

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/tcpproxy"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

// invariants are the checker's invariants in the summary's order.
var invariants = []string{invHistoryOnce, invStatus, invCommands, invOperations, invTraits, invFeed, invFlat}

// faultKinds are the faults injected, in the summary's order.
var faultKinds = []string{"satellite kill -9", "hub replica kill -9", "hub replica frozen (SIGSTOP 25 s)", "link cut",
	"PostgreSQL restart", "Ironic slow (10 s answers for 30 s)", "Placement down (503 for 60 s)",
	faultDiskFull, "PostgreSQL at max_connections (20 s)", "scripted satellite flood (10 s at full speed)", faultStalledWatch,
	faultFailover, faultOversized}

// faultDiskFull is the fault left out when the sites' state files have no
// tmpfs of their own (site.stateDir).
const faultDiskFull = "satellite disk full (30 s)"

// maxConnections is the soak clusters' max_connections (primary and
// standby alike): room for both hubs' pools and the checker's, few enough
// for the max_connections fault to fill quickly.
const maxConnections = 60

// resync is the satellites' --resync-interval in the soak.
const resync = 30 * time.Second

// rig is everything the soak runs.
type rig struct {
	t *testing.T
	// pair is the PostgreSQL primary and its synchronous standby; db is
	// their multi-host URL (target_session_attrs=read-write), which the
	// hubs and the checker use and which follows a failover.
	pair    *pgtest.Pair
	db      string
	pool    *pgxpool.Pool
	lb      *tcpproxy.Proxy
	hubA    *harness.Hub
	mu      sync.Mutex
	hubB    *harness.Hub
	sites   []*site
	sats    []*satsim.Sat
	fc      ironlinkv1.FleetServiceClient
	ops     ironlinkv1.OperationServiceClient
	watch   *watcher
	faults  map[string]int
	opsSent map[string]int
	// figures are what faults measured (a failover's times, a flood's
	// memory), by kind, for the summary.
	figures map[string][]string
	// sampleMu is held while hub-a's memory is sampled and while a fault
	// that would skew the sample (the oversized flood) runs.
	sampleMu sync.Mutex
	chk      *checker
}

// only, when set, restricts the faults injected to the kinds whose name
// contains one of its comma-separated words (to try one fault at length).
var only = flag.String("soak.only", os.Getenv("SOAK_ONLY"), "inject only the fault kinds whose name contains one of these comma-separated words (default $SOAK_ONLY; empty: all)")

// chosen reports whether kind is among the faults -soak.only allows.
func chosen(kind string) bool {
	if *only == "" {
		return true
	}
	for _, w := range strings.Split(*only, ",") {
		if w != "" && strings.Contains(kind, w) {
			return true
		}
	}
	return false
}

var minutes = flag.Float64("soak.minutes", envMinutes(), "how long TestSoak runs, in minutes (default $SOAK_MINUTES, else 60)")

func envMinutes() float64 {
	if v, err := strconv.ParseFloat(os.Getenv("SOAK_MINUTES"), 64); err == nil && v > 0 {
		return v
	}
	return 60
}

// TestSoak runs the soak for -soak.minutes (SOAK_MINUTES) and fails on any
// violation of the invariants; it prints the summary table.
func TestSoak(t *testing.T) {
	dur := time.Duration(*minutes * float64(time.Minute))
	r := &rig{t: t, faults: map[string]int{}, opsSent: map[string]int{}, figures: map[string][]string{}}
	r.pair = pgtest.StartPair(t, "ironlink", true)
	r.pair.SetMaxConnections(t, maxConnections)
	r.db = r.pair.URL("ironlink")
	r.pool = harness.Pool(t, r.db)
	r.hubA = harness.StartHub(t, bins, r.db, "hub-a", append(profileFlags(), hubFlags...)...)
	r.hubB = harness.StartHub(t, bins, r.db, "hub-b", hubFlags...)
	lb, err := tcpproxy.New("127.0.0.1:0", []string{r.hubA.Addr, r.hubB.Addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	r.lb = lb
	r.fc = harness.Fleet(t, r.hubA.Addr)
	r.ops = ironlinkv1.NewOperationServiceClient(harness.Dial(t, r.hubA.Addr))
	// The consumer's flow-control window is fixed at 64 KiB (no BDP
	// growth), so that a stall fills it and the hub's send blocks.
	wcc, err := grpc.NewClient(r.hubA.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithInitialWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wcc.Close() })
	r.watch = newWatcher(ironlinkv1.NewFleetServiceClient(wcc))
	for i := range 3 {
		s := newSite(t, fmt.Sprintf("soak-%d", i), 30)
		// --sweep-interval: the Nova project of an instance whose quick
		// look-up failed is learnt again by the next sweep (default 5 min).
		s.startSatellite(t, lb.Addr(), "--resync-interval", resync.String(), "--sweep-interval", "30s",
			"--operations-cloud", opsCloud, "--operations-poll-interval", "500ms")
		r.sites = append(r.sites, s)
	}
	for i := range 2 {
		r.sats = append(r.sats, satsim.New(satsim.Config{Site: fmt.Sprintf("soak-scripted-%d", i), Addr: lb.Addr(), Devices: 40, DevicesPerBatch: 5, Window: 4}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range r.sats {
		wg.Add(1)
		go func() { defer wg.Done(); s.Run(ctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, s := range r.sites {
		waitDevices(t, r.pool, s, 60*time.Second)
		s.churn(500 * time.Millisecond)
	}

	chk := newChecker(r.pool, r.sites, resync+45*time.Second, 3*time.Minute)
	hs := &hubSamples{}
	r.chk = chk
	start := time.Now()
	// Warm-up: a fifth of the run, at least 2 minutes. The live heap's
	// floor rises for the first 2-3 minutes of load (statement caches,
	// lazily built protobuf coders, periodic queries whose result sets grow
	// with the windows they read: 3.88 -> 4.13 MB in one 5-minute run) and
	// is flat after (docs/howto/soak.md, "The memory figures").
	warm := start.Add(max(2*time.Minute, dur/5))
	t.Logf("soak: %s, warm-up until %s", dur, warm.Format(time.TimeOnly))
	end := start.Add(dur)
	load, stopLoad := context.WithDeadline(ctx, end)
	defer stopLoad()
	var lw sync.WaitGroup
	lw.Add(7)
	go func() { defer lw.Done(); heapProfiles(load, r.hubA.AdminAddr, start) }()
	go func() { defer lw.Done(); r.scriptedLoad(load) }()
	go func() { defer lw.Done(); r.operator(load) }()
	go func() { defer lw.Done(); r.operations(load) }()
	go func() { defer lw.Done(); r.watch.run(load) }()
	go func() { defer lw.Done(); r.injectFaults(load) }()
	go func() {
		defer lw.Done()
		for load.Err() == nil {
			if r.sampleMu.TryLock() { // not while the oversized flood runs
				hs.sampleHub(load, r.pool, r.hubA.AdminAddr, r.hubA.Replica)
				r.sampleMu.Unlock()
			}
			chk.round(load)
			sleep(load, 5*time.Second)
		}
	}()
	lw.Wait()
	t.Logf("soak: load ended after %s; settling", time.Since(start).Round(time.Second))
	figs := r.finish(chk, hs, warm)
	hs.writeSamples(start)
	r.summary(chk, time.Since(start), figs)
}

// kill SIGKILLs the site's satellite and starts it again with the same
// state file.
func (s *site) kill(t *testing.T) {
	s.mu.Lock()
	p := s.sat
	s.mu.Unlock()
	p.Kill()
	s.restart(t)
}

// round runs every live check once; errors reading PostgreSQL (it may be
// restarting) skip the check and are not violations.
func (c *checker) round(ctx context.Context) {
	_ = c.statuses(ctx)
	_ = c.historyRepeats(ctx)
	_ = c.commandsFinish(ctx, false)
	_ = c.operationsFinish(ctx, false)
	_ = c.traits(ctx, false)
}

// commandsFinish checks that no command stays unfinished (PENDING, SENT or
// FAILED) for longer than commandGrace, a FAILED one also not for longer
// than overdueGrace past the end of its retry back-off; final, at the end,
// that every command is SUCCEEDED or SUPERSEDED by a newer generation and
// applied generation = desired generation.
//
// The back-off is the hub's documented policy (--command-failure-backoff
// doubled per failure, at most 5 min): a command that failed several times
// while Placement was down waits before its next try. Waiting out its
// back-off is not being stuck; not being tried once it is over is.
func (c *checker) commandsFinish(ctx context.Context, final bool) error {
	rows, err := c.pool.Query(ctx, `
		SELECT c.id::text, c.generation, c.state, c.last_error, d.desired_generation, d.applied_generation,
			now() - c.created_at > $1::interval
			AND (c.state <> 'FAILED' OR c.updated_at < now() - $2::interval - make_interval(secs =>
				LEAST($4::float8, $3::float8 * power(2, GREATEST(c.failures - 1, 0)))))
		FROM commands c JOIN devices d ON d.id = c.device_id`, c.commandGrace.String(), overdueGrace.String(),
		failureBackoff.Seconds(), maxFailureBackoff.Seconds())
	if err != nil {
		return fmt.Errorf("commands: %w", err)
	}
	defer rows.Close()
	var bad []string
	n := 0
	for rows.Next() {
		var id, state, lastErr string
		var gen, dg, ag int64
		var old bool
		if err := rows.Scan(&id, &gen, &state, &lastErr, &dg, &ag, &old); err != nil {
			return fmt.Errorf("commands: %w", err)
		}
		n++
		done := state == "SUCCEEDED" || state == "SUPERSEDED"
		switch {
		case final && gen == dg && (state != "SUCCEEDED" || ag != dg):
			bad = append(bad, fmt.Sprintf("command %s (current generation %d) ended %s, applied %d (last error %q)", id, gen, state, ag, lastErr))
		case final && gen < dg && !done:
			bad = append(bad, fmt.Sprintf("command %s (generation %d < %d) ended %s", id, gen, dg, state))
		case !final && !done && old:
			bad = append(bad, fmt.Sprintf("command %s still %s after %s (last error %q)", id, state, c.commandGrace, lastErr))
		}
	}
	c.record(invCommands, n, c.newOnly(invCommands, bad)...)
	return rows.Err()
}

// backoffLeft is the longest time a FAILED command (current generation,
// not PERMANENT) still has to wait before the hub sends it again under its
// retry back-off (the policy commandsFinish mirrors); 0 when none waits or
// PostgreSQL does not answer.
func backoffLeft(ctx context.Context, pool *pgxpool.Pool) time.Duration {
	var secs float64
	err := pool.QueryRow(ctx, `
		SELECT COALESCE(max(EXTRACT(EPOCH FROM c.updated_at - now()) +
			LEAST($2::float8, $1::float8 * power(2, GREATEST(c.failures - 1, 0)))), 0)
		FROM commands c JOIN devices d ON d.id = c.device_id AND d.desired_generation = c.generation
		WHERE c.state = 'FAILED' AND c.failure_class <> 'PERMANENT'`,
		failureBackoff.Seconds(), maxFailureBackoff.Seconds()).Scan(&secs)
	if err != nil || secs <= 0 {
		return 0
	}
	return time.Duration(secs * float64(time.Second))
}

// outageEnded notes that an outage (a fault that stops commands from
// being applied) ended now.
func (c *checker) outageEnded() {
	c.mu.Lock()
	c.faultEnded = time.Now()
	c.mu.Unlock()
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// scriptedLoad has each scripted satellite number a delta batch every 200 ms.
func (r *rig) scriptedLoad(ctx context.Context) {
	for ctx.Err() == nil {
		for _, s := range r.sats {
			s.AddDeltas(1)
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// operator quarantines or releases a random node of a real site every
// second (through hub-a, retried by the next round when refused).
func (r *rig) operator(ctx context.Context) {
	for ctx.Err() == nil {
		s := r.sites[rand.IntN(len(r.sites))]
		nodes := s.sim.Nodes()
		if len(nodes) > 0 {
			n := nodes[rand.IntN(len(nodes))]
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var err error
			kind := "quarantine"
			if rand.IntN(2) == 0 {
				_, err = r.fc.QuarantineDevice(cctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: n.UUID, Reason: "soak"})
			} else {
				kind = "release"
				_, err = r.fc.ReleaseDevice(cctx, &ironlinkv1.ReleaseDeviceRequest{DeviceId: n.UUID, Reason: "soak"})
			}
			cancel()
			r.mu.Lock()
			if err != nil {
				kind += " refused"
			}
			r.opsSent[kind]++
			r.mu.Unlock()
		}
		sleep(ctx, time.Second)
	}
}

// injectFaults injects one fault of a random kind every 20-40 s.
func (r *rig) injectFaults(ctx context.Context) {
	var kinds []string
	for _, k := range faultKinds {
		if (k != faultDiskFull || r.sites[0].stateDir != "") && chosen(k) {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		r.t.Errorf("no fault kind matches -soak.only %q", *only)
		return
	}
	for {
		sleep(ctx, 20*time.Second+rand.N(20*time.Second))
		if ctx.Err() != nil {
			return
		}
		k := kinds[rand.IntN(len(kinds))]
		r.inject(k)
		r.mu.Lock()
		r.faults[k]++
		r.mu.Unlock()
	}
}

func (r *rig) inject(kind string) {
	t := r.t
	switch kind {
	case "satellite kill -9":
		s := r.sites[rand.IntN(len(r.sites))]
		s.kill(t)
	case "hub replica kill -9":
		// hub-b only: hub-a's /metrics is the one watched for leaks.
		r.mu.Lock()
		b := r.hubB
		r.mu.Unlock()
		b.Kill()
		nb := harness.StartHubAt(t, bins, b.Addr, r.db, "hub-b", hubFlags...)
		r.mu.Lock()
		r.hubB = nb
		r.mu.Unlock()
	case "link cut":
		r.lb.Cut()
	case "PostgreSQL restart":
		// The primary (since the last failover, the promoted one).
		r.pair.Primary.Stop(t)
		time.Sleep(2 * time.Second) // the outage itself
		r.pair.Primary.Start(t)
	case faultFailover:
		r.failover()
	case faultOversized:
		r.oversizedFlood()
	case "hub replica frozen (SIGSTOP 25 s)":
		// Longer than hub-b's lease: it is fenced, its links move.
		r.mu.Lock()
		pid := r.hubB.Pid()
		r.mu.Unlock()
		_ = syscall.Kill(pid, syscall.SIGSTOP)
		time.Sleep(25 * time.Second)
		_ = syscall.Kill(pid, syscall.SIGCONT)
	case "Ironic slow (10 s answers for 30 s)":
		s := r.sites[rand.IntN(len(r.sites))]
		s.sim.InjectFault(openstacksim.Fault{Service: "baremetal", Delay: 10 * time.Second, Times: -1})
		time.Sleep(30 * time.Second)
		s.sim.ClearFaults()
	case "Placement down (503 for 60 s)":
		s := r.sites[rand.IntN(len(r.sites))]
		s.sim.InjectFault(openstacksim.Fault{Service: "placement", Status: 503, Times: -1})
		time.Sleep(60 * time.Second)
		s.sim.ClearFaults()
	case faultStalledWatch:
		// Long enough to fill the consumer's 64 KiB window (about 25 s of
		// events at the soak's rate) and then the hubs'
		// --watch-send-timeout (10 s): the hub ends the stream
		// WATCH_FELL_BEHIND and the consumer resumes from its last cursor.
		r.watch.stall(60 * time.Second)
	case faultDiskFull:
		// The satellite keeps serving (commands, operations, deltas) with
		// its state file unwritable, and writes it again once space is back.
		s := r.sites[rand.IntN(len(r.sites))]
		filler, err := s.fillDisk()
		if err != nil {
			t.Errorf("%s: %v", kind, err)
		}
		time.Sleep(30 * time.Second)
		if err := os.Remove(filler); err != nil {
			t.Errorf("%s: %v", kind, err)
		}
	case "PostgreSQL at max_connections (20 s)":
		fillers, err := fillSlots(r.pair.Primary.URL("ironlink"))
		if err != nil {
			t.Logf("%s: %v", kind, err)
		}
		time.Sleep(20 * time.Second)
		for _, c := range fillers {
			c.Close(context.Background())
		}
	case "scripted satellite flood (10 s at full speed)":
		// One site sends as fast as its acks come back (its share is one
		// batch every 200 ms); the others' deltas and the operators' calls
		// go on.
		s := r.sats[rand.IntN(len(r.sats))]
		before := s.Stats().LastSent
		s.Produce(true)
		time.Sleep(10 * time.Second)
		s.Produce(false)
		t.Logf("flood: %s sent %d batches in 10 s", s.Site(), s.Stats().LastSent-before)
	}
	r.chk.outageEnded()
	t.Logf("fault injected: %s", kind)
}

// finish stops the churn and waits until the final invariants hold (or
// times out recording what is left): conditions equal the simulators', the
// scripted sites' history exactly what they sent, every command final,
// every trait equal to its desired state.
func (r *rig) finish(chk *checker, hs *hubSamples, warm time.Time) string {
	t := r.t
	for _, s := range r.sites {
		s.stopChurn()
	}
	bg := context.Background()
	for _, s := range r.sites {
		if err := harness.Within(2*time.Minute, func() error { return truthDiff(bg, r.pool, s) }); err != nil {
			chk.record(invStatus, 1, fmt.Sprintf("site %s: stored conditions never equalled the simulator's: %v", s.name, err))
		}
	}
	for _, s := range r.sats {
		dctx, cancel := context.WithTimeout(bg, 2*time.Minute)
		err := s.WaitDrained(dctx)
		cancel()
		if err == nil {
			err = s.Verify(bg, r.pool)
		}
		st := s.Stats()
		var bad []string
		if err != nil {
			bad = append(bad, fmt.Sprintf("scripted site %s: %v", s.Site(), err))
		}
		chk.record(invHistoryOnce, st.AckedDeltas, bad...)
	}
	// Every commanded device is resynced within one resync interval, and
	// a command that failed in the last fault (Placement down, say) is
	// tried again once its retry back-off is over (see commandsFinish: it
	// can be minutes, attempts counting every send).
	_ = harness.Within(resync+30*time.Second+backoffLeft(bg, r.pool), func() error {
		return commandsDone(bg, r.pool)
	})
	_ = chk.commandsFinish(bg, true)
	_ = harness.Within(chk.commandGrace, func() error { return operationsDone(bg, r.pool) })
	_ = chk.operationsFinish(bg, true)
	_ = harness.Within(resync+30*time.Second, func() error {
		_ = chk.traits(bg, false)
		if len(chk.mismatch) > 0 {
			return fmt.Errorf("%d traits differ from the desired state", len(chk.mismatch))
		}
		return nil
	})
	_ = chk.traits(bg, true)
	_ = chk.statuses(bg)
	_ = chk.historyRepeats(bg)
	figs, _ := hs.flat(chk, warm)
	figs += "\n" + r.watch.report(chk)
	for inv, v := range chk.violations {
		for i, s := range v {
			if i < 10 {
				t.Errorf("%s: %s", inv, s)
			}
		}
	}
	return figs
}

// summary prints the summary table: faults injected by kind, operator
// calls, invariants checked and violations.
func (r *rig) summary(chk *checker, took time.Duration, figs string) {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "SOAK SUMMARY\t%s\t\n", took.Round(time.Second))
	fmt.Fprintf(w, "fault\tinjected\t\n")
	total := 0
	for _, k := range faultKinds {
		if k == faultDiskFull && r.sites[0].stateDir == "" {
			fmt.Fprintf(w, "%s\tnot injected (no tmpfs: needs root)\t\n", k)
			continue
		}
		fmt.Fprintf(w, "%s\t%d\t\n", k, r.faults[k])
		total += r.faults[k]
	}
	fmt.Fprintf(w, "(all)\t%d\t\n", total)
	fmt.Fprintf(w, "operator call\tcount\t\n")
	for _, k := range []string{"quarantine", "quarantine refused", "release", "release refused", "reboot", "reboot refused"} {
		fmt.Fprintf(w, "%s\t%d\t\n", k, r.opsSent[k])
	}
	fmt.Fprintf(w, "invariant\tchecked\tviolations\n")
	nv := 0
	for _, inv := range invariants {
		fmt.Fprintf(w, "%s\t%d\t%d\n", inv, chk.checked[inv], len(chk.violations[inv]))
		nv += len(chk.violations[inv])
	}
	fmt.Fprintf(w, "(all)\t\t%d\n", nv)
	_ = w.Flush()
	fmt.Fprintf(&b, "hub-a after warm-up: %s\n", figs)
	for _, k := range faultKinds {
		for i, f := range r.figures[k] {
			fmt.Fprintf(&b, "%s #%d: %s\n", k, i+1, f)
		}
	}
	fmt.Fprint(os.Stdout, b.String())
	r.t.Log("\n" + b.String())
}

// operations starts a forced REBOOT of a random node of a real site every
// 3 s (through hub-a). A refusal (the node busy with another operation, in
// a state a reboot does not start from, PostgreSQL down) is counted; the
// next round picks another node.
func (r *rig) operations(ctx context.Context) {
	for ctx.Err() == nil {
		sleep(ctx, 3*time.Second)
		s := r.sites[rand.IntN(len(r.sites))]
		nodes := s.sim.Nodes()
		if len(nodes) == 0 || ctx.Err() != nil {
			continue
		}
		n := nodes[rand.IntN(len(nodes))]
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := r.ops.StartOperation(cctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_REBOOT,
			Site: s.name, Devices: []string{n.UUID}, Reason: "soak", Force: true})
		cancel()
		kind := "reboot"
		if err != nil {
			kind += " refused"
		}
		r.mu.Lock()
		r.opsSent[kind]++
		r.mu.Unlock()
	}
}

// operationsDone reports an error while an operation is not final.
func operationsDone(ctx context.Context, pool *pgxpool.Pool) error {
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM operations WHERE state IN ('PENDING', 'RUNNING')`).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%d operations not final", n)
	}
	return nil
}

// fillSlots takes every connection slot of the PostgreSQL at url (as
// superuser, so the reserved ones too) and terminates every other client
// session, until none is left: the hubs can neither keep nor open a
// connection. The caller closes the returned sessions to end the fault.
func fillSlots(url string) ([]*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = "filler"
	var fillers []*pgx.Conn
	deadline := time.Now().Add(30 * time.Second)
	for {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err := pgx.ConnectConfig(ctx, cfg)
			cancel()
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "53300" { // too_many_connections
				break
			}
			if err != nil {
				return fillers, fmt.Errorf("filler: %w", err)
			}
			fillers = append(fillers, c)
		}
		if len(fillers) == 0 {
			return nil, errors.New("no filler session could connect")
		}
		var others int
		if err := fillers[0].QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE backend_type = 'client backend' AND application_name <> 'filler' AND pid <> pg_backend_pid()`).Scan(&others); err != nil {
			return fillers, fmt.Errorf("terminate the other sessions: %w", err)
		}
		if others == 0 {
			return fillers, nil
		}
		if time.Now().After(deadline) {
			return fillers, fmt.Errorf("%d other sessions left after 30 s of filling", others)
		}
	}
}

// fillDisk fills the site's state file system (a file written until
// ENOSPC) and returns the filler's path, to remove when the fault ends.
func (s *site) fillDisk() (string, error) {
	path := filepath.Join(s.stateDir, "filler")
	f, err := os.Create(path)
	if err != nil {
		return path, fmt.Errorf("fill %s: %w", path, err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return path, nil
			}
			return path, fmt.Errorf("fill %s: %w, want ENOSPC", path, err)
		}
	}
}

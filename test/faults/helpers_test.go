package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/tcpproxy"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
	"github.com/ironlink/ironlink/test/simtruth"
)

const readyTrait = openstacksim.ReadyTrait

// fastHub are hub flags that make delivery and failure handling quick
// enough for tests that must end within a minute.
func fastHub(extra ...string) []string {
	return append([]string{"--command-sweep", "500ms", "--command-resend-after", "3s", "--command-failure-backoff", "1s",
		"--stale-after", "60s", "--heartbeat-interval", "1s", "--keepalive-min-time", "1s", "--log-level", "debug"}, extra...)
}

// newDatabase is a scenario's fresh database (internal/pgtest): its URL for
// the hubs and a pool to read the hub's tables directly.
func newDatabase(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	db := pgtest.NewDatabase(t)
	return db, harness.Pool(t, db)
}

// startHub starts hub replica over db with fastHub's flags plus extra.
func startHub(t *testing.T, db, replica string, extra ...string) *harness.Hub {
	t.Helper()
	return harness.StartHub(t, bins, db, replica, fastHub(extra...)...)
}

// site is one simulated OpenStack site with its satellite process.
type site struct {
	name       string
	sim        *openstacksim.Cloud
	cloudsYAML string
	stateFile  string
	sat        *harness.Proc
	churnStop  context.CancelFunc
	churnDone  chan struct{}
	// tap records what the site's satellites send through via.
	tap *linkTap
	// healthSock is the satellite's health door (healthSiteMetrics).
	healthSock string
}

// via returns the address of a tap (linkTap) in front of the hub at
// hubAddr: a satellite, or a load balancer, given it instead of the hub's
// address has every batch it sends recorded for checkLinkHistory.
func (s *site) via(t *testing.T, hubAddr string) string { return s.tap.tap(t, hubAddr) }

// verify is a real-satellite site's final check: within timeout the hub's
// conditions equal the simulator's truth; no history row repeats the one
// before it (checkHistory); the history is every change the satellites sent
// through via (checkLinkHistory); every command ended right (checkCommands).
func (s *site) verify(t *testing.T, pool *pgxpool.Pool, timeout time.Duration) {
	t.Helper()
	waitTruth(t, pool, s, timeout)
	checkHistory(t, pool)
	s.checkLinkHistory(t, pool)
	checkCommands(t, pool, s)
}

// checkLinkHistory checks the hub's history of the site against every
// change its satellites sent through via (linkTap.checkHistory).
func (s *site) checkLinkHistory(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	s.tap.checkHistory(t, pool, s.name)
}

// newSite starts a simulator seeded like the test bed with n nodes; its
// clouds.yaml names the clouds "sim" and opsCloud.
func newSite(t *testing.T, name string, n int) *site {
	t.Helper()
	sim := openstacksim.New(openstacksim.Options{})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	sim.SeedLikeTestbed(n)
	dir := t.TempDir()
	path := filepath.Join(dir, "clouds.yaml")
	// Two clouds, one application credential: "sim" (observation) and
	// opsCloud (operations, for a satellite given opsSatArgs).
	ops := strings.TrimPrefix(string(sim.CloudsYAML(opsCloud)), "clouds:\n")
	if err := os.WriteFile(path, append(sim.CloudsYAML("sim"), ops...), 0o600); err != nil {
		t.Fatal(err)
	}
	return &site{name: name, sim: sim, cloudsYAML: path, stateFile: filepath.Join(dir, "state.json"), tap: newLinkTap()}
}

// satArgs are the satellite flags for hubAddr plus extra.
func (s *site) satArgs(hubAddr string, extra ...string) []string {
	return append([]string{"--site", s.name, "--hub", hubAddr, "--clouds-yaml", s.cloudsYAML, "--cloud", "sim",
		"--no-auth", "--hub-plaintext", "--poll-interval", "1s", "--max-backoff", "1s", "--heartbeat-interval", "1s", "--state-file", s.stateFile,
		"--log-level", "debug"}, extra...)
}

// startSatellite starts a satellite process for the site (another one may run).
func (s *site) startSatellite(t *testing.T, label, hubAddr string, extra ...string) *harness.Proc {
	t.Helper()
	p := harness.Start(t, "satellite "+s.name+label, bins.Satellite(), s.satArgs(hubAddr, extra...)...)
	s.sat = p
	return p
}

// churn lets the fleet change every interval until stopChurn.
func (s *site) churn(t *testing.T, interval time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	s.churnStop, s.churnDone = cancel, make(chan struct{})
	go func() {
		defer close(s.churnDone)
		s.sim.Churn(ctx, interval, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	}()
	t.Cleanup(s.stopChurn)
}

func (s *site) stopChurn() {
	if s.churnStop != nil {
		s.churnStop()
		<-s.churnDone
		s.churnStop = nil
	}
}

// readyNodes returns the UUIDs of nodes whose provider has the ready trait
// and that are not in maintenance, in order.
func (s *site) readyNodes() []string {
	var out []string
	for _, n := range s.sim.Nodes() {
		tr, _, ok := s.sim.ProviderTraits(n.UUID)
		if ok && slices.Contains(tr, readyTrait) {
			out = append(out, n.UUID)
		}
	}
	return out
}

// addNodeTrait puts the ready trait on the Ironic node too (as Nova's
// driver would find it), so a quarantine has two writes to make.
func (s *site) addNodeTrait(t *testing.T, id string) {
	t.Helper()
	if err := s.sim.UpdateNode(id, func(n *openstacksim.Node) {
		if !slices.Contains(n.Traits, readyTrait) {
			n.Traits = append(n.Traits, readyTrait)
		}
	}); err != nil {
		t.Fatal(err)
	}
}

// waitDevices waits until the hub lists every node of the site.
func waitDevices(t *testing.T, pool *pgxpool.Pool, s *site, timeout time.Duration) {
	t.Helper()
	simtruth.WaitDevices(t, pool, s.name, s.sim, timeout)
}

// truthDiff compares the hub's conditions of the site's devices with the
// simulator's truth (test/simtruth.Diff).
func truthDiff(ctx context.Context, pool *pgxpool.Pool, s *site) error {
	return simtruth.Diff(ctx, pool, s.name, s.sim)
}

// waitTruth waits until the hub's conditions of the site equal the
// simulator's truth (churn must be stopped).
func waitTruth(t *testing.T, pool *pgxpool.Pool, s *site, timeout time.Duration) {
	t.Helper()
	harness.Eventually(t, timeout, func() error { return truthDiff(context.Background(), pool, s) })
}

// checkHistory fails the test when condition_history holds two consecutive
// rows for the same (device, type) that say the same thing (a change
// recorded twice). CustomerReady is left out: a change of only its
// observed generation is a real change that the history columns cannot show.
func checkHistory(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT device_id::text, type, status, reason, message, id FROM (
			SELECT h.*, lag(status) OVER w AS pstatus, lag(reason) OVER w AS preason, lag(message) OVER w AS pmessage
			FROM condition_history h WINDOW w AS (PARTITION BY device_id, type ORDER BY id)) x
		WHERE status = pstatus AND reason = preason AND message = pmessage AND type <> 'CustomerReady'
		LIMIT 10`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var dev, typ, st, reason, msg string
		var id int64
		if err := rows.Scan(&dev, &typ, &st, &reason, &msg, &id); err != nil {
			t.Fatal(err)
		}
		t.Errorf("condition_history row %d repeats the previous one for device %s %s: %s/%s %q", id, dev, typ, st, reason, msg)
	}
	var removedFlaps int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM devices WHERE removed`).Scan(&removedFlaps); err != nil {
		t.Fatal(err)
	}
	if removedFlaps > 0 {
		t.Errorf("%d devices are marked removed, none was deleted", removedFlaps)
	}
}

// checkCommands fails the test when a command is not in a final state that
// fits (SUCCEEDED, or SUPERSEDED by a newer generation), or when a device's
// trait in the simulator differs from its desired state.
func checkCommands(t *testing.T, pool *pgxpool.Pool, sites ...*site) {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `
		SELECT c.id::text, c.device_id::text, c.generation, c.state, c.last_error, d.desired_generation
		FROM commands c JOIN devices d ON d.id = c.device_id ORDER BY c.created_at`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, dev, state, lastErr string
		var gen, desiredGen int64
		if err := rows.Scan(&id, &dev, &gen, &state, &lastErr, &desiredGen); err != nil {
			t.Fatal(err)
		}
		switch {
		case gen == desiredGen && state != "SUCCEEDED":
			t.Errorf("command %s (device %s generation %d, the current one) is %s (last error %q), want SUCCEEDED", id, dev, gen, state, lastErr)
		case gen < desiredGen && state != "SUPERSEDED" && state != "SUCCEEDED":
			t.Errorf("command %s (device %s generation %d < %d) is %s, want SUPERSEDED or SUCCEEDED", id, dev, gen, desiredGen, state)
		}
	}
	rows.Close()
	rows, err = pool.Query(ctx, `SELECT id::text, desired_impairment, desired_generation, applied_generation FROM devices WHERE desired_impairment <> 'NONE'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, desired string
		var dg, ag int64
		if err := rows.Scan(&id, &desired, &dg, &ag); err != nil {
			t.Fatal(err)
		}
		if dg != ag {
			t.Errorf("device %s: desired generation %d, applied %d", id, dg, ag)
		}
		for _, s := range sites {
			n, ok := s.sim.Node(id)
			if !ok {
				continue
			}
			pt, _, _ := s.sim.ProviderTraits(id)
			want := desired == "RELEASED"
			if slices.Contains(n.Traits, readyTrait) != want || slices.Contains(pt, readyTrait) != want {
				t.Errorf("device %s desired %s: node traits %v, provider traits %v", id, desired, n.Traits, pt)
			}
		}
	}
}

// quarantine asks the hub (retrying while it is unavailable) and returns the command id.
func quarantine(t *testing.T, fc ironlinkv1.FleetServiceClient, id, reason string, timeout time.Duration) string {
	t.Helper()
	var cmd string
	harness.Eventually(t, timeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		r, err := fc.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: id, Reason: reason})
		if err != nil {
			return err
		}
		cmd = r.GetCommand().GetCommandId()
		return nil
	})
	return cmd
}

func release(t *testing.T, fc ironlinkv1.FleetServiceClient, id, reason string, timeout time.Duration) string {
	t.Helper()
	var cmd string
	harness.Eventually(t, timeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		r, err := fc.ReleaseDevice(ctx, &ironlinkv1.ReleaseDeviceRequest{DeviceId: id, Reason: reason})
		if err != nil {
			return err
		}
		cmd = r.GetCommand().GetCommandId()
		return nil
	})
	return cmd
}

// waitCommand waits until the command is in state want and returns it.
func waitCommand(t *testing.T, fc ironlinkv1.FleetServiceClient, id string, want ironlinkv1.CommandState, timeout time.Duration) *ironlinkv1.OperatorCommand {
	t.Helper()
	var cmd *ironlinkv1.OperatorCommand
	harness.Eventually(t, timeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		r, err := fc.GetCommand(ctx, &ironlinkv1.GetCommandRequest{CommandId: id})
		if err != nil {
			return err
		}
		cmd = r.GetCommand()
		if cmd.GetState() != want {
			return fmt.Errorf("command %s is %v (attempts %d, error %q), want %v", id, cmd.GetState(), cmd.GetAttempts(), cmd.GetLastError(), want)
		}
		return nil
	})
	return cmd
}

// linkReplica returns the replica holding the site's link, "" when none.
func linkReplica(pool *pgxpool.Pool, site string) string {
	var r *string
	_ = pool.QueryRow(context.Background(), `SELECT link_replica FROM sites WHERE name = $1`, site).Scan(&r)
	if r == nil {
		return ""
	}
	return *r
}

// runSats runs scripted satellites until the test ends.
func runSats(t *testing.T, sats ...*satsim.Sat) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range sats {
		wg.Add(1)
		go func() { defer wg.Done(); s.Run(ctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// drainAndVerify stops production, waits for every batch to be acked and
// verifies each scripted satellite's site against the hub's tables.
func drainAndVerify(t *testing.T, pool *pgxpool.Pool, timeout time.Duration, sats ...*satsim.Sat) {
	t.Helper()
	for _, s := range sats {
		s.Produce(false)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, s := range sats {
		if err := s.WaitDrained(ctx); err != nil {
			t.Fatalf("%v (link errors: %v)", err, lastN(s.LinkErrors(), 5))
		}
	}
	failed := 0
	for _, s := range sats {
		if err := s.Verify(context.Background(), pool); err != nil {
			failed++
			if failed <= 5 {
				t.Errorf("scripted site %s: %v", s.Site(), err)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d scripted sites differ from what they sent", failed, len(sats))
	}
}

func lastN(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// newProxy starts a tcpproxy on loopback in front of backends.
func newProxy(t *testing.T, backends ...string) *tcpproxy.Proxy {
	t.Helper()
	p, err := tcpproxy.New("127.0.0.1:0", backends, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// sitesOn counts sites whose link is held by replica.
func sitesOn(pool *pgxpool.Pool, replica string) int {
	var n int
	_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM sites WHERE link_replica = $1`, replica).Scan(&n)
	return n
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// flowing waits until traffic has gone through since it was called: two
// more batches acked for every scripted satellite and committed for every
// real site (whose churn makes its satellite report). It stands where a
// test let traffic flow for a fixed time after a fault: on a slow machine
// that time may pass with nothing sent, and the checks after it then test
// nothing that happened after the fault.
func flowing(t *testing.T, pool *pgxpool.Pool, sites []*site, sats ...*satsim.Sat) {
	t.Helper()
	seq := func(s *site) int64 {
		var n int64
		_ = pool.QueryRow(context.Background(), `SELECT last_sequence FROM sites WHERE name = $1`, s.name).Scan(&n)
		return n
	}
	realFrom := map[string]int64{}
	for _, s := range sites {
		realFrom[s.name] = seq(s)
	}
	scriptedFrom := map[string]uint64{}
	for _, s := range sats {
		scriptedFrom[s.Site()] = s.Stats().LastAcked
	}
	harness.Eventually(t, 30*time.Second, func() error {
		for _, s := range sites {
			if n := seq(s); n < realFrom[s.name]+2 {
				return errorf("site %s: hub sequence %d, want ≥ %d", s.name, n, realFrom[s.name]+2)
			}
		}
		for _, s := range sats {
			if st := s.Stats(); st.LastAcked < scriptedFrom[s.Site()]+2 {
				return errorf("scripted site %s: acked %d, want ≥ %d", s.Site(), st.LastAcked, scriptedFrom[s.Site()]+2)
			}
		}
		return nil
	})
}

// waitLogLines waits until p has logged more than after lines holding s
// (after: a p.Count(s) taken before the event) and returns its lines
// holding s.
func waitLogLines(t *testing.T, p *harness.Proc, s string, after int, timeout time.Duration) []string {
	t.Helper()
	harness.Eventually(t, timeout, func() error {
		if n := p.Count(s); n <= after {
			return errorf("%d lines with %q in the log, want more than %d", n, s, after)
		}
		return nil
	})
	return p.Lines(s)
}

// listening waits until n sessions have LISTENed again (one per replica:
// the store's notification dispatcher, hub/store/notify): after PostgreSQL
// came back, only then does a notification reach a link. The dispatcher
// LISTENs on the command, operation and feed channels in turn, in no fixed
// order, so its session's last statement is the LISTEN of any of them; a
// failed LISTEN fails the whole reconnect, so a session that got as far as
// one listens on all three.
func listening(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, func() error {
		var got int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'idle' AND query ILIKE 'listen %'`).Scan(&got); err != nil {
			return err
		}
		if got < n {
			return errorf("%d sessions listen for the hub's notifications, want %d", got, n)
		}
		return nil
	})
}

var sentSequence = regexp.MustCompile(`msg="batch sent" .*\bsequence=(\d+)`)

// settled waits until the satellite p of site s has nothing more to
// report: its last two polls changed nothing and the hub has committed
// every batch it sent. It is the positive sign a check that nothing more
// happens waits for (instead of sleeping for "a few polls").
func settled(t *testing.T, pool *pgxpool.Pool, s *site, p *harness.Proc) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, func() error {
		polls := p.Lines(`msg="poll done"`)
		if len(polls) < 2 || !strings.Contains(polls[len(polls)-1], " changed=0 ") || !strings.Contains(polls[len(polls)-2], " changed=0 ") {
			return errorf("site %s: the satellite's last two polls were not both idle (%d polls)", s.name, len(polls))
		}
		sent := int64(0)
		if m := sentSequence.FindAllStringSubmatch(p.Output(), -1); len(m) > 0 {
			sent, _ = strconv.ParseInt(m[len(m)-1][1], 10, 64)
		}
		var committed int64
		if err := pool.QueryRow(context.Background(), `SELECT last_sequence FROM sites WHERE name = $1`, s.name).Scan(&committed); err != nil {
			return err
		}
		if committed != sent {
			return errorf("site %s: the satellite sent up to batch %d, the hub committed up to %d", s.name, sent, committed)
		}
		return nil
	})
}

package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/test/harness"
	"github.com/ironlink/ironlink/test/simtruth"
)

const readyTrait = openstacksim.ReadyTrait

// opsCloud is the cloud of the operations credential in every site's
// clouds.yaml (newSite); the satellites run with --operations-cloud opsCloud.
const opsCloud = "sim-ops"

// site is one simulated OpenStack site with its satellite process.
type site struct {
	name       string
	sim        *openstacksim.Cloud
	cloudsYAML string
	stateFile  string
	// stateDir is the state file's own tmpfs ("" when it could not be
	// mounted: the disk-full fault is then left out).
	stateDir string
	hubAddr  string
	extra    []string

	mu        sync.Mutex
	sat       *harness.Proc
	churnStop context.CancelFunc
	churnDone chan struct{}
}

// newSite starts a simulator seeded like the test bed with n nodes.
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
	// opsCloud (operations).
	ops := strings.TrimPrefix(string(sim.CloudsYAML(opsCloud)), "clouds:\n")
	if err := os.WriteFile(path, append(sim.CloudsYAML("sim"), ops...), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &site{name: name, sim: sim, cloudsYAML: path, stateFile: filepath.Join(dir, "state.json")}
	// The state file on a tmpfs of its own, so that the soak can fill its
	// disk ("satellite disk full"); mounting needs root (or
	// CAP_SYS_ADMIN): without, that fault is not injected and the summary
	// says so.
	stateDir := filepath.Join(dir, "state")
	if err := os.Mkdir(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", stateDir).CombinedOutput(); err != nil {
		t.Logf("site %s: no tmpfs for the state file (%v: %s): the disk-full fault is left out", name, err, strings.TrimSpace(string(out)))
		return s
	}
	t.Cleanup(func() { _ = exec.Command("umount", stateDir).Run() })
	s.stateDir, s.stateFile = stateDir, filepath.Join(stateDir, "state.json")
	return s
}

// startSatellite starts the site's satellite process towards hubAddr with
// extra flags; restart starts it again the same way.
func (s *site) startSatellite(t *testing.T, hubAddr string, extra ...string) {
	t.Helper()
	s.hubAddr, s.extra = hubAddr, extra
	s.restart(t)
}

func (s *site) restart(t *testing.T) {
	t.Helper()
	args := append([]string{"--site", s.name, "--hub", s.hubAddr, "--clouds-yaml", s.cloudsYAML, "--cloud", "sim",
		"--no-auth", "--hub-plaintext", "--poll-interval", "1s", "--max-backoff", "1s", "--heartbeat-interval", "1s",
		"--state-file", s.stateFile}, s.extra...)
	p := harness.Start(t, "satellite "+s.name, bins.Satellite(), args...)
	s.mu.Lock()
	s.sat = p
	s.mu.Unlock()
}

// churn lets the fleet change every interval until stopChurn.
func (s *site) churn(interval time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	s.churnStop, s.churnDone = cancel, make(chan struct{})
	go func() {
		defer close(s.churnDone)
		s.sim.Churn(ctx, interval, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	}()
}

func (s *site) stopChurn() {
	if s.churnStop != nil {
		s.churnStop()
		<-s.churnDone
		s.churnStop = nil
	}
}

// hasTrait reports whether the node's provider carries the ready trait.
func (s *site) hasTrait(id string) (has, ok bool) {
	tr, _, ok := s.sim.ProviderTraits(id)
	return slices.Contains(tr, readyTrait), ok
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

// Retry back-off of a FAILED command (hubFlags' --command-failure-backoff;
// the hub's fixed 5-minute cap, link.DefaultMaxFailureBackoff), and how long
// one may stay FAILED past it before the checker calls it stuck: longer
// than the soak's longest outage of a link (a replica frozen for 25 s, then
// its lease running out).
const (
	failureBackoff    = 2 * time.Second
	maxFailureBackoff = 5 * time.Minute
	overdueGrace      = time.Minute
)

// hubFlags make delivery and failure handling quick.
var hubFlags = []string{"--command-sweep", "1s", "--command-resend-after", "5s", "--command-failure-backoff", failureBackoff.String(),
	"--stale-after", "60s", "--heartbeat-interval", "1s", "--keepalive-min-time", "1s", "--operation-resend-after", "10s",
	"--watch-send-timeout", "10s"}

// commandsDone reports an error while a command is not final.
func commandsDone(ctx context.Context, pool *pgxpool.Pool) error {
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM commands WHERE state IN ('PENDING', 'SENT', 'FAILED')`).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%d commands not final", n)
	}
	return nil
}

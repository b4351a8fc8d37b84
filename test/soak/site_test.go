package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/conditions"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/test/harness"
)

const readyTrait = openstacksim.ReadyTrait

// site is one simulated OpenStack site with its satellite process.
type site struct {
	name       string
	sim        *openstacksim.Cloud
	cloudsYAML string
	stateFile  string
	hubAddr    string
	extra      []string

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
	if err := sim.WriteCloudsYAML(path, "sim"); err != nil {
		t.Fatal(err)
	}
	return &site{name: name, sim: sim, cloudsYAML: path, stateFile: filepath.Join(dir, "state.json")}
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

// waitDevices waits until the hub's database lists every node of the site.
func waitDevices(t *testing.T, pool *pgxpool.Pool, s *site, timeout time.Duration) {
	t.Helper()
	want := len(s.sim.Nodes())
	harness.Eventually(t, timeout, func() error {
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM devices WHERE site = $1 AND NOT removed`, s.name).Scan(&n); err != nil {
			return err
		}
		if n != want {
			return fmt.Errorf("site %s: hub has %d live devices, simulator %d", s.name, n, want)
		}
		return nil
	})
}

func toIronic(n openstacksim.Node) ironic.Node {
	return ironic.Node{UUID: n.UUID, Name: n.Name, ProvisionState: n.ProvisionState, TargetProvisionState: n.TargetProvisionState,
		PowerState: n.PowerState, Maintenance: n.Maintenance, MaintenanceReason: n.MaintenanceReason, Fault: n.Fault,
		LastError: n.LastError, InstanceUUID: n.InstanceUUID, AllocationUUID: n.AllocationUUID, ResourceClass: n.ResourceClass,
		ConductorGroup: n.ConductorGroup, Owner: n.Owner, Lessee: n.Lessee, Traits: n.Traits, ProvisionUpdatedAt: n.ProvisionUpdatedAt}
}

// truthDiff compares the stored conditions of the site's devices with what
// the satellite's mapping (satellite/conditions) gives for the simulator's
// state now (CustomerReady by status only: its reason also depends on what
// the satellite applied). It returns the differences, or nil.
func truthDiff(ctx context.Context, pool *pgxpool.Pool, s *site) error {
	type cond struct{ status, reason, message string }
	rows, err := pool.Query(ctx, `
		SELECT c.device_id::text, c.type, c.status, c.reason, c.message
		FROM device_conditions c JOIN devices d ON d.id = c.device_id
		WHERE d.site = $1 AND NOT d.removed`, s.name)
	if err != nil {
		return err
	}
	got := map[string]map[string]cond{}
	for rows.Next() {
		var id, typ string
		var c cond
		if err := rows.Scan(&id, &typ, &c.status, &c.reason, &c.message); err != nil {
			rows.Close()
			return err
		}
		if got[id] == nil {
			got[id] = map[string]cond{}
		}
		got[id][typ] = c
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var errs []error
	nodes := s.sim.Nodes()
	if len(got) != len(nodes) {
		errs = append(errs, fmt.Errorf("site %s: hub has conditions for %d live devices, simulator has %d nodes", s.name, len(got), len(nodes)))
	}
	for _, n := range nodes {
		tr, _, ok := s.sim.ProviderTraits(n.UUID)
		pv := conditions.PlacementView{Read: true, ProviderExists: ok, HasTrait: slices.Contains(tr, readyTrait),
			TraitDefined: s.sim.TraitDefined(readyTrait)}
		obs := conditions.Observation{Node: toIronic(n), Now: time.Now(), Placement: pv}
		if srv, ok := s.sim.Server(n.InstanceUUID); ok && n.InstanceUUID != "" {
			obs.InstanceProject = srv.TenantID
		}
		g := got[n.UUID]
		for _, w := range conditions.Map(conditions.Config{}, obs) {
			h, ok := g[string(w.Type)]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("device %s: no %s at the hub", n.UUID, w.Type))
			case string(w.Status) != h.status:
				errs = append(errs, fmt.Errorf("device %s: %s is %s/%s at the hub, simulator says %s/%s", n.UUID, w.Type, h.status, h.reason, w.Status, w.Reason))
			case w.Type != condition.CustomerReady && (w.Reason != h.reason || w.Message != h.message):
				errs = append(errs, fmt.Errorf("device %s: %s is %s/%q at the hub, simulator says %s/%q", n.UUID, w.Type, h.reason, h.message, w.Reason, w.Message))
			}
		}
		if len(errs) > 10 {
			break
		}
	}
	return errors.Join(errs...)
}

// hubFlags make delivery and failure handling quick.
var hubFlags = []string{"--command-sweep", "1s", "--command-resend-after", "5s", "--command-failure-backoff", "2s",
	"--stale-after", "60s", "--heartbeat-interval", "1s", "--keepalive-min-time", "1s"}

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

package agent_test

import (
	"context"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/agent"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/link"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
	"github.com/ironlink/ironlink/satellite/placement"
)

// sweepSite is a simulated site with Nova and an agent whose site
// conditions are kept, for the tests that need the clients' HTTP (field
// loss, request counts); the sweep's logic is tested on site.Fixture
// (sweep_test.go).
type sweepSite struct {
	sim  *openstacksim.Cloud
	a    *agent.Agent
	site *link.SiteState
}

func newSweepSite(t *testing.T, opts openstacksim.Options) *sweepSite {
	t.Helper()
	return newSweepSiteWith(t, opts, agent.Config{PollInterval: time.Hour})
}

func newSweepSiteWith(t *testing.T, opts openstacksim.Options, cfg agent.Config) *sweepSite {
	t.Helper()
	sim, c := ostest.ConnectSim(t, opts)
	sim.DefineTrait("CUSTOM_CUSTOMER_READY")
	ir := ironic.New(c.Baremetal, ostest.Logger(t))
	ir.ReadRetry = ostest.FastRetry(2)
	cl := agent.Clients{Ironic: ir}
	if c.Placement != nil {
		pl := placement.New(c.Placement, ostest.Logger(t))
		pl.ReadRetry = ostest.FastRetry(2)
		cl.Placement = pl
	}
	if c.Compute != nil {
		nv := nova.New(c.Compute, ostest.Logger(t))
		nv.ReadRetry = ostest.FastRetry(2)
		cl.Nova = nv
	}
	out := link.NewOutbox()
	out.MaxBatches = 1 << 20
	site := link.NewSiteState(nil)
	s := &sweepSite{sim: sim, site: site, a: agent.New(cfg, cl, out, site, ostest.Logger(t))}
	return s
}

func (s *sweepSite) node(t *testing.T, name, state, instance string) string {
	t.Helper()
	n := s.sim.AddNode(openstacksim.Node{Name: name, ProvisionState: state, PowerState: "power on", ResourceClass: "gpu-h100", InstanceUUID: instance})
	s.sim.AddProvider(n.UUID, n.UUID, nil)
	return n.UUID
}

func (s *sweepSite) poll(t *testing.T) {
	t.Helper()
	if err := s.a.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (s *sweepSite) sweep(t *testing.T) {
	t.Helper()
	if err := s.a.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// device returns the device's current facts and conditions (as a new link's
// snapshot would send them).
func (s *sweepSite) device(t *testing.T, id string) *ironlinkv1.DeviceUpdate {
	t.Helper()
	return snapshotDevice(t, s.a, id)
}

// snapshotDevice returns device id as a new link's snapshot would send it.
func snapshotDevice(t *testing.T, a *agent.Agent, id string) *ironlinkv1.DeviceUpdate {
	t.Helper()
	devs, ok := a.Snapshot()
	if !ok {
		t.Fatal("no snapshot")
	}
	for _, d := range devs {
		if d.GetDeviceId() == id {
			return d
		}
	}
	t.Fatalf("device %s not in the snapshot", id)
	return nil
}

func cond(d *ironlinkv1.DeviceUpdate, typ condition.Type) *ironlinkv1.Condition {
	for _, c := range d.GetConditions() {
		if c.GetType() == string(typ) {
			return c
		}
	}
	return nil
}

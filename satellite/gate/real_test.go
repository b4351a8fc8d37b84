package gate_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/ironlink/ironlink/satellite/gate"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
	"github.com/ironlink/ironlink/satellite/placement"
)

// TestRealQuarantineRelease quarantines then releases one node of the real
// test bed and checks the trait on the node and its resource provider, then
// restores the node's original gate. The node is $IRONLINK_TEST_NODE or the
// last available, non-maintenance node that has a resource provider.
func TestRealQuarantineRelease(t *testing.T) {
	c := ostest.RealCloud(t)
	if c.Placement == nil {
		ostest.MissingService(t, "Placement", "the quarantine writes the provider's trait; the standalone path is covered by the simulator tests")
	}
	log := ostest.Logger(t)
	ic := ironic.New(c.Baremetal, log)
	pc := placement.New(c.Placement, log)
	a := &gate.Applier{Ironic: ic, Placement: pc}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	node := os.Getenv("IRONLINK_TEST_NODE")
	if node == "" {
		nodes, err := ic.ListNodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rps, err := pc.Providers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range slices.Backward(nodes) {
			if n.ProvisionState == "available" && !n.Maintenance && rps[n.UUID] {
				node = n.UUID
				break
			}
		}
		if node == "" {
			if os.Getenv(ostest.EnvRequireReal) == "1" {
				t.Fatal("no available node with a resource provider on the test cloud (seed more nodes)")
			}
			t.Skip("no available node with a resource provider on the test cloud")
		}
	}
	before, err := a.State(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s before: %+v", node, before)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		restore(ctx, t, ic, pc, node, before)
	})

	r, err := a.Apply(ctx, node, true)
	if err != nil {
		t.Fatalf("quarantine: %v (%s)", err, r.Detail)
	}
	t.Logf("quarantine: %+v", r)
	s, err := a.State(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	if s.NodeHasTrait || s.ProviderHasTrait || !s.ProviderExists {
		t.Fatalf("after quarantine: %+v", s)
	}
	// Idempotent.
	if r, err := a.Apply(ctx, node, true); err != nil || r.NodeChanged || r.ProviderChanged {
		t.Fatalf("second quarantine: %+v %v", r, err)
	}

	r, err = a.Apply(ctx, node, false)
	if err != nil {
		t.Fatalf("release: %v (%s)", err, r.Detail)
	}
	t.Logf("release: %+v", r)
	if !r.NodeChanged || !r.ProviderChanged {
		t.Errorf("release changed nothing: %+v", r)
	}
	s, err = a.State(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	if !s.NodeHasTrait || !s.ProviderHasTrait || s.Drift {
		t.Fatalf("after release: %+v", s)
	}
	if r, err := a.Apply(ctx, node, false); err != nil || r.NodeChanged || r.ProviderChanged {
		t.Fatalf("second release: %+v %v", r, err)
	}
}

// restore puts the gate trait back the way it was on each side.
func restore(ctx context.Context, t *testing.T, ic *ironic.Client, pc *placement.Client, node string, s gate.State) {
	var err error
	if s.NodeHasTrait {
		err = ic.AddTrait(ctx, node, gate.DefaultTrait)
	} else {
		err = ic.RemoveTrait(ctx, node, gate.DefaultTrait)
	}
	if err != nil {
		t.Errorf("restore node trait: %v", err)
	}
	if s.ProviderExists {
		if _, err := pc.SetProviderTrait(ctx, node, gate.DefaultTrait, s.ProviderHasTrait); err != nil && !errors.Is(err, placement.ErrProviderNotFound) {
			t.Errorf("restore provider trait: %v", err)
		}
	}
}

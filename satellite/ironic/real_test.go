package ironic_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
)

// seeded is one entry of the test bed's seeded-nodes.json.
type seeded struct {
	Name           string `json:"name"`
	UUID           string `json:"uuid"`
	ProvisionState string `json:"provision_state"`
	Maintenance    bool   `json:"maintenance"`
	ResourceClass  string `json:"resource_class"`
}

// TestRealListNodes lists the real test bed and checks every seeded node is
// there with its seeded provision state.
func TestRealListNodes(t *testing.T) {
	cfg := ostest.RealCloudConfig(t)
	c := ostest.RealCloud(t)
	ic := ironic.New(c.Baremetal, ostest.Logger(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	nodes, err := ic.ListNodes(ctx)
	if err != nil {
		t.Fatalf("ListNodes: %v", err)
	}
	t.Logf("ListNodes: %d nodes in %s at microversion %s", len(nodes), time.Since(start), c.IronicVersion)
	byUUID := map[string]ironic.Node{}
	for _, n := range nodes {
		byUUID[n.UUID] = n
		if n.ProvisionState == "" {
			t.Errorf("node %s: empty provision state", n.UUID)
		}
		if n.Missing["traits"] || n.Missing["maintenance"] || n.Missing["provision_state"] {
			t.Errorf("node %s: missing %v", n.UUID, n.Missing)
		}
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(cfg.CloudsYAML), "seeded-nodes.json"))
	if err != nil {
		t.Logf("no seeded-nodes.json next to clouds.yaml (%v): only checked the listing itself", err)
		return
	}
	var want []seeded
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("seeded-nodes.json: %v", err)
	}
	for _, w := range want {
		n, ok := byUUID[w.UUID]
		if !ok {
			t.Errorf("seeded node %s (%s) not listed", w.Name, w.UUID)
			continue
		}
		if w.ProvisionState == "available" && n.InstanceUUID != "" {
			continue // Nova (or a test) deployed an instance on it since seeding
		}
		if n.ProvisionState != w.ProvisionState {
			t.Errorf("node %s: provision state %q, seeded %q", w.Name, n.ProvisionState, w.ProvisionState)
		}
		if n.Name != w.Name || n.Maintenance != w.Maintenance || n.ResourceClass != w.ResourceClass {
			t.Errorf("node %s: got name=%q maintenance=%v rc=%q, seeded %+v", w.Name, n.Name, n.Maintenance, n.ResourceClass, w)
		}
	}
	// GetNode returns the same view as the listing.
	if len(want) > 0 {
		n, err := ic.GetNode(ctx, want[0].UUID)
		if err != nil {
			t.Fatalf("GetNode: %v", err)
		}
		if n.UUID != want[0].UUID || n.ProvisionState != byUUID[n.UUID].ProvisionState {
			t.Errorf("GetNode %s: %+v", want[0].UUID, n)
		}
	}
}

// BenchmarkRealListNodes times a full listing of the real cloud.
func BenchmarkRealListNodes(b *testing.B) {
	c := ostest.RealCloud(b)
	ic := ironic.New(c.Baremetal, nil)
	ctx := context.Background()
	for b.Loop() {
		if _, err := ic.ListNodes(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

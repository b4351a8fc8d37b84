package agent_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/satellite/agent"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/ironic/ironictest"
	"github.com/ironlink/ironlink/satellite/link"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
)

// envSeedInventory names the test bed's seed-inventory script, which
// stores an inventory and BIOS settings for a node in Ironic's database
// (the fake-hardware driver cannot inspect).
const envSeedInventory = "IRONLINK_E2E_SEED_INVENTORY"

// TestHardwareRealCloud enrols three hwtest-* nodes on the real cloud,
// stores the inventories of two (one with 7 GPUs; the third has none and
// says so) and checks that the agent
// reads them once, not again on an unchanged poll, and again after a real
// (fake-interface) inspection moved inspection_finished_at, seeing the
// changed memory. The nodes are deleted at the end. The agent lists only
// these nodes (ownNodes): other packages' real-cloud tests run beside this
// one on the same cloud and inspect their nodes, which are rightly read
// again (a run saw "an unchanged poll read 2 nodes' hardware").
func TestHardwareRealCloud(t *testing.T) {
	c := ostest.RealCloud(t)
	seed := os.Getenv(envSeedInventory)
	if seed == "" {
		if os.Getenv(ostest.EnvRequireReal) == "1" {
			t.Fatalf("%s=1 but %s is not set: the test bed's seed-inventory stores the inventories", ostest.EnvRequireReal, envSeedInventory)
		}
		t.Skipf("set %s to the test bed's seed-inventory to run this test", envSeedInventory)
	}
	log := ostest.Logger(t)
	ir := ironic.New(c.Baremetal, log)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	prefix := fmt.Sprintf("hwtest-%06d", time.Now().UnixNano()%1000000)
	ids := map[string]string{}
	for _, name := range []string{prefix + "-a", prefix + "-b", prefix + "-bare"} {
		n, err := ir.CreateNode(ctx, map[string]any{"name": name, "driver": "fake-hardware", "inspect_interface": "fake", "resource_class": "hwtest"})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		ids[name] = n.UUID
		t.Cleanup(func() {
			dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
			defer dcancel()
			if err := ir.DeleteNode(dctx, n.UUID); err != nil {
				t.Errorf("delete %s: %v", name, err)
			}
		})
	}
	a, b := ids[prefix+"-a"], ids[prefix+"-b"]
	ironictest.RunSeed(t, seed, a)
	ironictest.RunSeed(t, seed, "--gpus", "7", b)

	out := link.NewOutbox()
	out.MaxBatches = 1 << 20
	ag := agent.New(agent.Config{PollInterval: time.Hour, HardwareReadsPerPoll: 10000}, agent.Clients{Ironic: ownNodes{ir, prefix + "-"}}, out, nil, log)
	if err := ag.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	ha, hb := snapshotDevice(t, ag, a).GetHardware(), snapshotDevice(t, ag, b).GetHardware()
	if !ha.GetInventoryAvailable() || ha.GetMemoryMib() != 2097152 || ha.GetPciDevices()[0].GetCount() != 8 ||
		ha.GetBiosSettings()["BiosVersion"] != "1.5.0" || ha.GetFirmwareVersions()["bios"] != "1.5.0" {
		t.Fatalf("hardware of %s: %v", a, ha)
	}
	if hb.GetPciDevices()[0].GetCount() != 7 {
		t.Fatalf("hardware of %s (7 GPUs): %v", b, hb)
	}
	// A node without an inventory (never inspected, nothing seeded) says
	// so: Ironic's 404 for its inventory is NotInspected, never an empty
	// machine; its BIOS settings (none) are read.
	if h := snapshotDevice(t, ag, ids[prefix+"-bare"]).GetHardware(); h == nil || h.GetInventoryAvailable() || h.GetInventoryStatus() != "NotInspected" ||
		h.GetMemoryMib() != 0 || len(h.GetPciDevices()) != 0 || !h.GetBiosAvailable() {
		t.Fatalf("hardware of the node without an inventory: %v, want inventory_available false, NotInspected, bios_available", h)
	}
	reads := ag.Stats().HardwareReads
	if err := ag.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if n := ag.Stats().HardwareReads - reads; n != 0 {
		t.Fatalf("an unchanged poll read %d nodes' hardware", n)
	}

	// A real inspection (fake interface) moves inspection_finished_at;
	// the re-seeded inventory has half the memory.
	ironictest.Inspect(ctx, t, ir, b)
	ironictest.RunSeed(t, seed, "--gpus", "7", "--memory-mib", "1048576", b)
	began := time.Now()
	if err := ag.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if n := ag.Stats().HardwareReads - reads; n != 1 {
		t.Fatalf("the poll after an inspection read %d nodes, want 1", n)
	}
	if got := snapshotDevice(t, ag, b).GetHardware().GetMemoryMib(); got != 1048576 {
		t.Fatalf("memory after re-inspection: %d MiB, want 1048576", got)
	}
	t.Logf("re-inspected node read in the next poll: %s", time.Since(began).Round(time.Millisecond))
}

// ownNodes is an Ironic client whose listing holds only the nodes named
// with prefix (every other method is the client's).
type ownNodes struct {
	*ironic.Client
	prefix string
}

func (o ownNodes) ListNodes(ctx context.Context) ([]ironic.Node, error) {
	all, err := o.Client.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	var out []ironic.Node
	for _, n := range all {
		if strings.HasPrefix(n.Name, o.prefix) {
			out = append(out, n)
		}
	}
	return out, nil
}

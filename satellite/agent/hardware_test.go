package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/agent"
	"github.com/ironlink/ironlink/satellite/hardware"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/link"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
)

// hwSite is a standalone simulated site whose agent's pushed updates the
// test reads.
type hwSite struct {
	sim   *openstacksim.Cloud
	a     *agent.Agent
	out   *link.Outbox
	nodes int
}

func newHWSite(t testing.TB, budget int) *hwSite {
	t.Helper()
	sim, c := ostest.ConnectSim(t, openstacksim.Options{IronicMaxLimit: 1000, NoPlacement: true, NoNova: true})
	ir := ironic.New(c.Baremetal, ostest.Logger(t))
	ir.ReadRetry = ostest.FastRetry(2)
	out := link.NewOutbox()
	out.MaxBatches = 1 << 20
	a := agent.New(agent.Config{PollInterval: time.Hour, HardwareReadsPerPoll: budget}, agent.Clients{Ironic: ir}, out, nil, ostest.Logger(t))
	return &hwSite{sim: sim, a: a, out: out}
}

// node adds a node with hw (nil: no inventory, no BIOS settings).
func (s *hwSite) node(name string, hw *openstacksim.Hardware) string {
	s.nodes++
	n := openstacksim.Node{UUID: fmt.Sprintf("00000000-0000-4000-8000-%012x", s.nodes), Name: name,
		ProvisionState: "available", PowerState: "power off", ResourceClass: "gpu-h100"}
	if hw != nil {
		openstacksim.SetHardware(&n, *hw)
		n.InspectionFinishedAt = time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	}
	return s.sim.AddNode(n).UUID
}

// poll polls once and returns the hardware pushed (by device) and the
// hardware requests the poll made.
func (s *hwSite) poll(t testing.TB) (map[string]*ironlinkv1.HardwareState, []string) {
	t.Helper()
	s.sim.ResetRequests()
	if err := s.a.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	var reqs []string
	for _, r := range s.sim.Requests() {
		if r.Service == "baremetal" && (strings.HasSuffix(r.Path, "/inventory") || strings.HasSuffix(r.Path, "/bios")) {
			reqs = append(reqs, r.Method+" "+r.Path)
		}
	}
	got := map[string]*ironlinkv1.HardwareState{}
	for _, b := range s.out.Take(s.a.Snapshot) {
		for _, d := range b.GetDevices() { // the first poll's is the link's snapshot
			if d.GetHardware() != nil {
				got[d.GetDeviceId()] = d.GetHardware()
			}
		}
		s.out.Ack(b.GetSequence())
	}
	return got, reqs
}

// A node's hardware is read on the first poll, not on the next ones, and
// again after its inspection_finished_at changed; a node without an
// inventory says so.
func TestHardwareReadOnceAndAfterReinspection(t *testing.T) {
	s := newHWSite(t, 0)
	hw := openstacksim.DefaultHardware
	a := s.node("gpu-a", &hw)
	b := s.node("gpu-b", &hw)
	bare := s.node("bare", nil)

	got, reqs := s.poll(t)
	if len(reqs) != 6 {
		t.Fatalf("first poll made %d hardware requests, want 6 (inventory and BIOS of 3 nodes): %v", len(reqs), reqs)
	}
	ha := got[a]
	if ha == nil || !ha.GetInventoryAvailable() || ha.GetMemoryMib() != 2<<20 || ha.GetCpuCount() != 224 ||
		ha.GetBiosSettings()["HyperThreading"] != "Disabled" || ha.GetFirmwareVersions()["bios"] != "1.5.0" || len(ha.GetDisks()) != 2 {
		t.Fatalf("hardware of %s = %v", a, ha)
	}
	if gpus := ha.GetPciDevices()[0]; gpus.GetVendorId() != "10de" || gpus.GetCount() != 8 {
		t.Fatalf("GPUs of %s = %v", a, gpus)
	}
	if hb := got[bare]; hb == nil || hb.GetInventoryAvailable() || hb.GetInventoryStatus() != "NotInspected" {
		t.Fatalf("hardware of the node without inventory = %v, want inventory_available false, NotInspected", hb)
	}

	got, reqs = s.poll(t)
	if len(reqs) != 0 || len(got) != 0 {
		t.Fatalf("unchanged poll made hardware requests %v and pushed %v", reqs, got)
	}

	if err := s.sim.UpdateNode(b, func(n *openstacksim.Node) {
		openstacksim.SetHardware(n, openstacksim.Hardware{GPUs: 8, MemoryMiB: 1 << 20, BIOSVersion: "1.5.0"})
	}); err != nil {
		t.Fatal(err)
	}
	if got, reqs = s.poll(t); len(reqs) != 0 {
		t.Fatalf("an inventory changed without a new inspection was read: %v %v", reqs, got)
	}
	if err := s.sim.UpdateNode(b, func(n *openstacksim.Node) { n.InspectionFinishedAt = time.Now().UTC() }); err != nil {
		t.Fatal(err)
	}
	got, reqs = s.poll(t)
	if len(reqs) != 2 || got[b].GetMemoryMib() != 1<<20 || len(got) != 1 {
		t.Fatalf("after re-inspection: requests %v, pushed %v; want b's inventory and BIOS read, memory 1048576", reqs, got)
	}
	if snap := snapshotDevice(t, s.a, b); snap.GetHardware().GetMemoryMib() != 1<<20 {
		t.Fatalf("snapshot hardware of b = %v", snap.GetHardware())
	}
}

// A poll reads at most --hardware-reads-per-poll nodes; the rest wait for
// the next polls.
func TestHardwareReadsPerPollBudget(t *testing.T) {
	s := newHWSite(t, 2)
	hw := openstacksim.DefaultHardware
	for i := range 5 {
		s.node(fmt.Sprintf("gpu-%d", i), &hw)
	}
	for i, want := range []int{2, 2, 1, 0} {
		got, reqs := s.poll(t)
		if len(got) != want || len(reqs) != 2*want {
			t.Fatalf("poll %d read %d nodes with %d requests, want %d and %d", i+1, len(got), len(reqs), want, 2*want)
		}
	}
	if st := s.a.Stats(); st.HardwareReads != 5 || st.HardwareDeferred != 3+1 {
		t.Fatalf("stats: reads %d deferred %d, want 5 and 4", st.HardwareReads, st.HardwareDeferred)
	}
}

// An inventory of unexpected shape is reported Malformed, never a crash,
// and an oversized BIOS list is cut to the 16 KiB bound.
func TestHardwareBadDocuments(t *testing.T) {
	s := newHWSite(t, 0)
	odd := s.node("odd", nil)
	big := s.node("big", nil)
	if err := s.sim.UpdateNode(odd, func(n *openstacksim.Node) {
		n.Inventory = map[string]any{"cpu": "not an object", "memory": []any{1}}
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.sim.UpdateNode(big, func(n *openstacksim.Node) {
		openstacksim.SetHardware(n, openstacksim.DefaultHardware)
		for i := range 2000 {
			n.BIOS[fmt.Sprintf("Setting%04d", i)] = strings.Repeat("v", 40)
		}
	}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.poll(t)
	if h := got[odd]; h.GetInventoryAvailable() || h.GetInventoryStatus() != "Malformed" {
		t.Fatalf("odd inventory = %v, want Malformed", h)
	}
	h := got[big]
	if !h.GetInventoryAvailable() || h.GetOmittedItems() == 0 || h.GetMemoryMib() != 2<<20 {
		t.Fatalf("big: available %v omitted %d memory %d", h.GetInventoryAvailable(), h.GetOmittedItems(), h.GetMemoryMib())
	}
}

// withNICs sets n's hardware to the default machine with count extra
// 100 Gb/s interfaces in its inventory (about 90 bytes of JSON each).
func withNICs(n *openstacksim.Node, count int) {
	openstacksim.SetHardware(n, openstacksim.DefaultHardware)
	nics := make([]any, count)
	for i := range nics {
		nics[i] = map[string]any{"name": fmt.Sprintf("ens%06d", i), "mac_address": fmt.Sprintf("02:00:00:%02x:%02x:%02x", i>>16&0xff, i>>8&0xff, i&0xff),
			"speed_mbps": 100000, "has_carrier": true}
	}
	n.Inventory["interfaces"] = nics
}

// Inventories of megabytes: one of ~2.7 MiB (30,000 interfaces) is read
// and reduced within the 16 KiB bound, the interfaces beyond the kept
// ones counted in omitted_items, the rest of the machine intact; one
// beyond the 4 MiB read bound (~5.4 MiB) is refused unread and reported
// Malformed (never empty, never a crash), its BIOS settings still read;
// both are sent and the next poll reads neither again.
func TestHardwareMegabyteInventories(t *testing.T) {
	s := newHWSite(t, 0)
	large, huge := s.node("large", nil), s.node("huge", nil)
	for id, count := range map[string]int{large: 30000, huge: 60000} {
		if err := s.sim.UpdateNode(id, func(n *openstacksim.Node) {
			withNICs(n, count)
			n.InspectionFinishedAt = time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
		}); err != nil {
			t.Fatal(err)
		}
	}
	got, reqs := s.poll(t)
	if len(reqs) != 4 {
		t.Fatalf("hardware requests %v, want inventory and BIOS of both nodes", reqs)
	}
	h := got[large]
	if !h.GetInventoryAvailable() || h.GetInventoryStatus() != "Read" || h.GetMemoryMib() != 2<<20 || h.GetPciDevices()[0].GetCount() != 8 ||
		h.GetBiosSettings()["HyperThreading"] != "Disabled" {
		t.Fatalf("large inventory: available %v status %s memory %d pci %v bios %v", h.GetInventoryAvailable(), h.GetInventoryStatus(),
			h.GetMemoryMib(), h.GetPciDevices(), h.GetBiosSettings())
	}
	if kept := len(h.GetNics()); kept == 0 || int(h.GetOmittedItems()) < 30000-kept || proto.Size(h) > hardware.MaxBytes {
		t.Fatalf("large inventory: %d NICs kept, %d omitted, %d bytes; want the rest of 30,000+ counted within %d bytes",
			kept, h.GetOmittedItems(), proto.Size(h), hardware.MaxBytes)
	}
	h = got[huge]
	if h == nil || h.GetInventoryAvailable() || h.GetInventoryStatus() != "Malformed" || !h.GetBiosAvailable() || h.GetBiosSettings()["HyperThreading"] != "Disabled" {
		t.Fatalf("inventory beyond 4 MiB = %v, want not available, Malformed, BIOS settings read", h)
	}
	if got, reqs := s.poll(t); len(reqs) != 0 || len(got) != 0 {
		t.Fatalf("the next poll read again: %v %v", reqs, got)
	}
}

// BenchmarkHardwareUnchangedPoll: requests of one poll of a 10,000-node
// site whose hardware was read and did not change: the listing's pages
// only.
func BenchmarkHardwareUnchangedPoll(b *testing.B) {
	s := newHWSite(b, 20000)
	hw := openstacksim.DefaultHardware
	for i := range 10000 {
		s.node(fmt.Sprintf("n-%05d", i), &hw)
	}
	if got, _ := s.poll(b); len(got) != 10000 {
		b.Fatalf("first poll read %d nodes", len(got))
	}
	var total, hwReqs int
	b.ResetTimer()
	for range b.N {
		_, reqs := s.poll(b)
		hwReqs = len(reqs)
		total = len(s.sim.Requests())
	}
	b.ReportMetric(float64(total), "requests/poll")
	b.ReportMetric(float64(hwReqs), "hardware-requests/poll")
}

// A node that had an inventory and is inspected again with no inventory
// left (Ironic answers 404) sends a NotInspected read, once, so the hub
// keeps the last facts marked stale (hub/hwprofile
// TestInventoryGoneKeepsFactsStale); the node's BIOS settings still read.
func TestHardwareInventoryGoneAfterReinspection(t *testing.T) {
	s := newHWSite(t, 0)
	hw := openstacksim.DefaultHardware
	a := s.node("gpu-a", &hw)
	if got, _ := s.poll(t); !got[a].GetInventoryAvailable() {
		t.Fatalf("first read of a: %v", got[a])
	}
	if err := s.sim.UpdateNode(a, func(n *openstacksim.Node) {
		n.Inventory, n.PluginData = nil, nil
		n.InspectionFinishedAt = time.Now().UTC()
	}); err != nil {
		t.Fatal(err)
	}
	got, reqs := s.poll(t)
	h := got[a]
	if len(reqs) != 2 || h == nil || h.GetInventoryAvailable() || h.GetInventoryStatus() != hardware.StatusNotInspected ||
		h.GetCpuCount() != 0 || !h.GetBiosAvailable() || h.GetInspectionFinishedAt() == nil {
		t.Fatalf("after the inventory went: requests %v, pushed %v; want one NotInspected read with the BIOS settings", reqs, h)
	}
	if got, reqs := s.poll(t); len(reqs) != 0 || len(got) != 0 {
		t.Fatalf("the gone inventory was read again: %v %v", reqs, got)
	}
	if snap := snapshotDevice(t, s.a, a); snap.GetHardware().GetInventoryStatus() != hardware.StatusNotInspected {
		t.Fatalf("snapshot hardware of a = %v", snap.GetHardware())
	}
}

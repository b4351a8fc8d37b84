package agent_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/agent"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/link"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
)

// wantProps is the expected cpus, memory_mb, local_gb, cpu_arch of a
// device's facts; a nil field must be unset (unknown).
type wantProps struct {
	cpus            *uint32
	memoryMB, local *uint64
	arch            *string
}

func u32(v uint32) *uint32 { return &v }
func u64(v uint64) *uint64 { return &v }
func str(v string) *string { return &v }

func checkProps(t *testing.T, what string, f *ironlinkv1.DeviceFacts, w wantProps) {
	t.Helper()
	eq := func(field string, got, want any, gotSet, wantSet bool) {
		if gotSet != wantSet || (wantSet && got != want) {
			t.Errorf("%s: facts.%s = %v (set %v), want %v (set %v)", what, field, got, gotSet, want, wantSet)
		}
	}
	eq("cpus", f.GetCpus(), deref(w.cpus), f.Cpus != nil, w.cpus != nil)
	eq("memory_mb", f.GetMemoryMb(), deref(w.memoryMB), f.MemoryMb != nil, w.memoryMB != nil)
	eq("local_gb", f.GetLocalGb(), deref(w.local), f.LocalGb != nil, w.local != nil)
	eq("cpu_arch", f.GetCpuArch(), deref(w.arch), f.CpuArch != nil, w.arch != nil)
}

func deref[T any](p *T) T {
	var z T
	if p == nil {
		return z
	}
	return *p
}

// The inspected properties of a node (Ironic properties cpus, memory_mb,
// local_gb, cpu_arch) reach the device's facts from the node listing: as
// numbers or as the strings old inspectors wrote, unset when the node has
// none or a value is not a count. A change of one property sends a delta
// with the new facts and no condition; a listing that leaves properties
// out keeps the last known values and sends nothing; inspection in the
// simulator sets them and the next poll reports them.
func TestInspectedPropertiesAppearInFacts(t *testing.T) {
	ctx := context.Background()
	sim, c := ostest.ConnectSim(t, openstacksim.Options{ProvisionStep: 5 * time.Millisecond})
	sim.DefineTrait(agent.ReadyTrait)
	add := func(name, ps string, props map[string]any) string {
		n := sim.AddNode(openstacksim.Node{Name: name, ProvisionState: ps, PowerState: "power off", ResourceClass: "baremetal",
			Traits: []string{agent.ReadyTrait}, Properties: props})
		sim.AddProvider(n.UUID, n.UUID, []string{agent.ReadyTrait})
		return n.UUID
	}
	// Listed in pages of 2, in this order: full and strings are on page 2.
	none := add("none", "available", nil)
	odd := add("odd", "available", map[string]any{"cpus": "many", "memory_mb": -1, "local_gb": 1.5, "cpu_arch": 7})
	full := add("full", "available", map[string]any{"cpus": 64, "memory_mb": 524288, "local_gb": 1800, "cpu_arch": "x86_64",
		"capabilities": "boot_mode:uefi", "root_device": map[string]any{"serial": "s1"}})
	strs := add("strings", "available", map[string]any{"cpus": "8", "memory_mb": "16384", "local_gb": "99", "cpu_arch": "aarch64"})
	fresh := add("fresh", "manageable", nil)

	ir := ironic.New(c.Baremetal, ostest.Logger(t))
	ir.ReadRetry = ostest.FastRetry(3)
	ir.PageLimit = 2 // later pages exist, for the field loss below
	out := link.NewOutbox()
	out.MaxBatches = 1 << 20
	a := agent.New(agent.Config{PollInterval: time.Hour}, agent.Clients{Ironic: ir}, out, nil, ostest.Logger(t))
	if err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	snap := byDevice(freshSnapshot(t, out, a))
	fullWant := wantProps{u32(64), u64(524288), u64(1800), str("x86_64")}
	checkProps(t, "full", snap[full].GetFacts(), fullWant)
	strsWant := wantProps{u32(8), u64(16384), u64(99), str("aarch64")}
	checkProps(t, "strings", snap[strs].GetFacts(), strsWant)
	checkProps(t, "none", snap[none].GetFacts(), wantProps{})
	checkProps(t, "odd", snap[odd].GetFacts(), wantProps{})
	checkProps(t, "fresh", snap[fresh].GetFacts(), wantProps{})

	deltas := func(what string) []*ironlinkv1.DeviceUpdate {
		t.Helper()
		if err := a.Poll(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var devs []*ironlinkv1.DeviceUpdate
		for _, b := range out.Take(a.Snapshot) {
			if b.GetSnapshot() != nil {
				t.Fatalf("%s: a snapshot batch, want deltas", what)
			}
			devs = append(devs, b.GetDevices()...)
		}
		return devs
	}
	if got := deltas("unchanged"); len(got) != 0 {
		t.Fatalf("unchanged site: %d updates: %v", len(got), got)
	}

	// A property changes (memory replaced): one delta, facts only.
	if err := sim.UpdateNode(full, func(n *openstacksim.Node) { n.Properties["memory_mb"] = 1048576 }); err != nil {
		t.Fatal(err)
	}
	got := deltas("memory_mb changed")
	if len(got) != 1 || got[0].GetDeviceId() != full || len(got[0].GetConditions()) != 0 {
		t.Fatalf("memory_mb changed: updates %v, want one for %s with facts and no condition", got, full)
	}
	fullWant.memoryMB = u64(1048576)
	checkProps(t, "full after the change", got[0].GetFacts(), fullWant)

	// Properties left out of pages 2+ (as some proxies and versions do):
	// the last known values stay, and nothing is sent (properties never
	// flip a condition).
	sim.SetFieldLoss(openstacksim.FieldLoss{LaterPages: true, Drop: []string{"properties"}})
	if got := deltas("properties left out"); len(got) != 0 {
		t.Fatalf("properties left out: %d updates, want none: %v", len(got), got)
	}
	snap = byDevice(freshSnapshot(t, out, a))
	checkProps(t, "full, properties left out", snap[full].GetFacts(), fullWant)
	checkProps(t, "strings, properties left out", snap[strs].GetFacts(), strsWant)
	if a.Stats().HeldConditions != 0 {
		t.Errorf("properties left out: %d conditions held, want none (no condition needs properties)", a.Stats().HeldConditions)
	}
	sim.SetFieldLoss(openstacksim.FieldLoss{})

	// Inspection (manageable → inspecting → inspect wait → manageable)
	// sets the properties; the poll after it reports them.
	_, err := c.Baremetal.Put(ctx, c.Baremetal.ServiceURL("nodes", fresh, "states", "provision"), map[string]any{"target": "inspect"}, nil,
		&gophercloud.RequestOpts{OkCodes: []int{http.StatusAccepted}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for n, _ := sim.Node(fresh); n.ProvisionState != "manageable" || n.TargetProvisionState != ""; n, _ = sim.Node(fresh) {
		if time.Now().After(deadline) {
			t.Fatalf("inspection did not finish: %s → %s", n.ProvisionState, n.TargetProvisionState)
		}
		time.Sleep(5 * time.Millisecond)
	}
	got = deltas("after inspection")
	var inspected *ironlinkv1.DeviceUpdate
	for _, d := range got {
		if d.GetDeviceId() == fresh {
			inspected = d
		}
	}
	if inspected == nil {
		t.Fatalf("after inspection: no update for the inspected node (%d updates)", len(got))
	}
	checkProps(t, "inspected", inspected.GetFacts(), wantProps{u32(64), u64(524288), u64(1800), str("x86_64")})
}

package remediation

import (
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
)

// Every safety check of a step start, each alone.
func TestBlocked(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	dev := "6f1c9e4e-2b7a-4c1e-9d3e-0a1b2c3d4e5f"
	p := policy.SitePolicy{Remediation: policy.Remediation{MaxInFlight: 2}}
	d := store.RemediationDevice{DeviceID: dev, Site: "site-a", Status: status.Faulted}
	win := policy.Window{Name: "patch", Start: now.Add(-time.Hour), End: now.Add(time.Hour)}
	rp := policy.SitePolicy{Remediation: policy.Remediation{MaxInFlight: 2, PerLabel: []policy.LabelInFlight{{Label: "rack", MaxInFlight: 1}}}}
	racked := store.RemediationDevice{DeviceID: dev, Site: "site-a", Labels: map[string]string{"rack": "r1"}}
	for _, c := range []struct {
		name string
		p    policy.SitePolicy
		d    store.RemediationDevice
		s    Safety
		want string
	}{
		{"free", p, d, Safety{InFlight: 1}, ""},
		{"K in flight", p, d, Safety{InFlight: 2}, WaitMaxInFlight},
		{"excluded", p, d, Safety{Excluded: &policy.Exclusion{Author: "bob", Reason: "burn-in"}}, WaitExcluded},
		{"exclusion ended", p, d, Safety{Excluded: &policy.Exclusion{End: now.Add(-time.Minute)}}, ""},
		{"maintenance window", policy.SitePolicy{Remediation: p.Remediation, MaintenanceWindows: []policy.Window{win}}, d, Safety{}, WaitMaintenanceWindow},
		{"guard tripped", p, d, Safety{Tripped: true}, WaitGuardTripped},
		{"site unreachable", p, store.RemediationDevice{DeviceID: dev, SiteStale: true}, Safety{}, WaitSiteUnreachable},
		{"rack free", rp, racked, Safety{InFlight: 1, DomainInFlight: map[string]int{"rack": 0}}, ""},
		{"rack full", rp, racked, Safety{InFlight: 1, DomainInFlight: map[string]int{"rack": 1}}, WaitDomainInFlight},
		{"no rack label", rp, d, Safety{InFlight: 1}, ""},
		{"customer instance", p, store.RemediationDevice{DeviceID: dev, CustomerAllocated: true}, Safety{}, WaitCustomerInstance},
		{"customer instance, the ladder acts on them", p, store.RemediationDevice{DeviceID: dev, CustomerAllocated: true}, Safety{CustomerAllowed: true}, ""},
	} {
		if got, _ := Blocked(c.p, c.d, c.s, now); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// The start plan: a handoff on a recommended action or a spent budget,
// else the first step now or once no longer blocked.
func TestStartPlan(t *testing.T) {
	l := &policy.Ladder{Steps: []policy.LadderStep{{Kind: "REBOOT", Timeout: time.Minute}, {Kind: "REPROVISION", Timeout: time.Hour}},
		Budget: policy.Budget{Ladders: 3, Window: 7 * 24 * time.Hour}, HandoffOn: policy.DefaultHandoffOn}
	d := store.RemediationDevice{DeviceID: "x", Name: "node-7"}
	for _, c := range []struct {
		d       store.RemediationDevice
		used    int
		blocked string
		want    string
	}{
		{d, 0, "", "would reboot node-7 now, step 1 of 2"},
		{d, 0, WaitMaxInFlight, "would reboot node-7, step 1 of 2, once no longer blocked (MaxInFlight)"},
		{d, 3, "", "would hand node-7 off for repair now: budget spent (3 of 3 ladders in 168h0m0s)"},
		{store.RemediationDevice{Name: "node-7", Recommended: []int32{5}}, 0, "", "would hand node-7 off for repair now: its fault recommends CONTACT_SUPPORT"},
	} {
		if got := StartPlan(l, c.d, c.used, c.blocked).Text; !strings.EqualFold(got, c.want) {
			t.Errorf("plan %q, want %q", got, c.want)
		}
	}
}

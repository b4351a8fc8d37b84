package policy

import (
	"strings"
	"testing"
	"time"
)

// TestDomainGuard: a per-label guard holds the third quarantine of one
// rack in the window (tripping that rack's guard, not the site's) while
// another rack and a device without the label still pass; once tripped,
// the rack's guard holds its devices even with room in the window, and
// only them; its percent bound counts the rack's devices; dry-run
// decisions never trip.
func TestDomainGuard(t *testing.T) {
	p := basePolicy()
	p.Guard = Guard{MaxDevices: 100, MaxPercent: 100, Window: time.Hour}
	p.Domains = []DomainGuard{{Label: "rack", MaxDevices: 2}}
	r12 := map[string]string{"rack": "r12", "switch": "s3"}
	recent := []RecentAction{{At: t0.Add(-time.Minute), Labels: r12}, {At: t0.Add(-2 * time.Minute), Labels: r12},
		{At: t0.Add(-2 * time.Hour), Labels: map[string]string{"rack": "r7"}}}
	st := site(100, recent)
	st.DomainDevices = map[string]map[string]int{"rack": {"r12": 16, "r7": 16}}
	decide := func(labels map[string]string, p SitePolicy) Decision {
		tr := faulted()
		tr.Labels = labels
		return Decide(Input{Policy: p, Trigger: tr, Site: st, Now: t0})
	}
	d := decide(map[string]string{"rack": "r12"}, p)
	if d.Action != ActionPending || d.Reason != ReasonHeldByGuard || d.Trips || d.TripsDomain == nil ||
		d.TripsDomain.String() != "rack=r12" || !strings.Contains(d.Detail, "rack=r12") {
		t.Fatalf("third of rack r12: %+v, want PENDING HeldByGuard tripping rack=r12 only, naming it", d)
	}
	// Its limits as set: no percentage is not "0%".
	if want := "quarantine 3 in 1h0m0s of rack=r12 would exceed its guard (2 devices of 16)"; d.Detail != want {
		t.Errorf("detail %q, want %q", d.Detail, want)
	}
	for _, l := range []map[string]string{{"rack": "r7"}, nil} {
		if d := decide(l, p); d.Action != ActionQuarantine {
			t.Errorf("labels %v: %+v, want QUARANTINE", l, d)
		}
	}
	// Tripped: r12 waits even with its window empty; r7 goes on.
	st.RecentActions = nil
	st.TrippedDomains = map[string]map[string]bool{"rack": {"r12": true}}
	if d := decide(map[string]string{"rack": "r12"}, p); d.Action != ActionPending || d.TripsDomain != nil ||
		!strings.Contains(d.Detail, "guard of rack=r12 is tripped") {
		t.Errorf("r12 while its guard is tripped: %+v, want PENDING naming the tripped guard", d)
	}
	if d := decide(map[string]string{"rack": "r7"}, p); d.Action != ActionQuarantine {
		t.Errorf("r7 while r12 is tripped: %+v, want QUARANTINE", d)
	}
	dom := Domain{Label: "rack", Value: "r12"}
	if RearmDomain(p, dom, st, 1, t0) {
		t.Error("rack r12 re-armed with an action it held still pending")
	}
	if !RearmDomain(p, dom, st, 0, t0) {
		t.Error("rack r12 not re-armed: nothing pending, its window empty")
	}
	st.RecentActions = recent
	if RearmDomain(p, dom, st, 0, t0) {
		t.Error("rack r12 re-armed with its window full")
	}
	if !RearmDomain(basePolicy(), dom, st, 3, t0) {
		t.Error("rack r12 not re-armed once the policy has no rack guard")
	}
	st.TrippedDomains = nil
	pct := p
	pct.Domains = []DomainGuard{{Label: "rack", MaxDevices: 10, MaxPercent: 10}}
	if d := decide(map[string]string{"rack": "r12"}, pct); d.Action != ActionPending || !strings.HasSuffix(d.Detail, "(10 devices, 10% of 16)") {
		t.Errorf("3 of 16 devices over 10%%: %+v, want PENDING naming both limits", d)
	}
	dry := p
	dry.DryRun = true
	if d := decide(map[string]string{"rack": "r12"}, dry); d.Action != ActionPending || d.Trips || d.TripsDomain != nil || !d.DryRun {
		t.Errorf("dry-run: %+v, want PENDING, dry-run, not tripping", d)
	}
}

func TestCommonCause(t *testing.T) {
	var faults []map[string]string
	for i := range 16 {
		f := map[string]string{"rack": "r12", "switch": "s3", "row": "b"}
		if i >= 14 {
			f = map[string]string{"rack": "r7", "switch": "s9", "row": "b"}
		}
		faults = append(faults, f)
	}
	c := CommonCause(faults)
	if c.Summary != "14 of 16 new faults are in rack r12, switch s3, row b" && c.Summary != "14 of 16 new faults are in rack r12, row b, switch s3" {
		t.Errorf("summary %q", c.Summary)
	}
	if c.Shares[0].Label != "row" || c.Shares[0].Count != 16 || c.Faults != 16 || c.Together != 14 {
		t.Errorf("cause %+v", c)
	}
	if c := CommonCause([]map[string]string{{"rack": "a"}, {"rack": "b"}, nil}); c.Summary != "" || len(c.Shares) != 0 {
		t.Errorf("nothing shared: %+v", c)
	}
}

func TestParsePerLabel(t *testing.T) {
	f, err := Parse([]byte(`policy:
  default:
    enabled: true
    rules: [{name: any}]
    guard: {perLabel: [{label: rack, maxDevices: 2, maxPercent: 50}]}
  sites:
    site-b: {guard: {perLabel: []}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if d := f.Effective("site-a").Domains; len(d) != 1 || d[0] != (DomainGuard{Label: "rack", MaxDevices: 2, MaxPercent: 50}) {
		t.Errorf("site-a per-label guards %+v", d)
	}
	if d := f.Effective("site-b").Domains; len(d) != 0 {
		t.Errorf("site-b per-label guards %+v, want none (its empty list overrides)", d)
	}
	_, err = Parse([]byte(`policy:
  default:
    guard: {perLabel: [{label: "r ack", maxDevices: 0, maxPercent: 120}, {label: rack, maxDevices: 1}, {label: rack, maxDevices: 1}]}
`))
	for _, want := range []string{"perLabel[0].label", "perLabel[0].maxDevices", "perLabel[0].maxPercent", "perLabel[2].label \"rack\": given twice"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to name %s", err, want)
		}
	}
}

// TestRuleLabels: a rule with labels matches only devices carrying them;
// the next rule decides the others; bad labels are refused at load.
func TestRuleLabels(t *testing.T) {
	p := basePolicy()
	r12 := p.Rules[1]
	r12.Name, r12.Labels = "rack-r12", map[string]string{"rack": "r12"}
	p.Rules = append([]Rule{r12}, p.Rules...)
	for _, tc := range []struct {
		labels map[string]string
		rule   string
	}{{map[string]string{"rack": "r12", "row": "b"}, "rack-r12"}, {map[string]string{"rack": "r7"}, "faulted"}, {nil, "faulted"}} {
		tr := faulted()
		tr.Labels = tc.labels
		if d := Decide(Input{Policy: p, Trigger: tr, Site: site(100, nil), Now: t0}); d.Rule != tc.rule {
			t.Errorf("labels %v: rule %q, want %q", tc.labels, d.Rule, tc.rule)
		}
	}
	_, err := Parse([]byte("policy:\n  default:\n    rules: [{name: r, labels: {rack: 'r 12'}}]\n"))
	if err == nil || !strings.Contains(err.Error(), "default.rules[0].labels.rack") {
		t.Errorf("bad rule label: %v", err)
	}
}

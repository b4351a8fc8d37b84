package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/internal/condition"
)

func TestHealthRuleMatchesOnlyItsFaults(t *testing.T) {
	f, err := Parse([]byte(`
policy:
  default:
    enabled: true
    rules:
      - name: gpu-bus
        to: [FAULTED]
        health: {componentClasses: [GPU], checks: [GpuXidError], errorCodes: ["79", "48"], recommendedActions: [RESTART_BM, "77"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	rules := f.Effective("s").Rules
	if got := rules[0].Health.RecommendedActions; len(got) != 2 || got[0] != 24 || got[1] != 77 {
		t.Fatalf("recommended actions %v, want [24 77]", got)
	}
	h := func(class, check string, action int32, codes ...string) *condition.Health {
		return &condition.Health{ComponentClass: class, CheckName: check, RecommendedAction: action, ErrorCodes: codes, Fatal: true}
	}
	trig := Trigger{From: status.Available, To: status.Faulted, CauseReason: condition.ReasonFatalError}
	for _, c := range []struct {
		name  string
		cause *condition.Health
		want  bool
	}{
		{"XID 79", h("GPU", "GpuXidError", 24, "79"), true},
		{"XID 48 among others", h("GPU", "GpuXidError", 77, "13", "48"), true},
		{"XID 13", h("GPU", "GpuXidError", 24, "13"), false},
		{"another check", h("GPU", "GpuThermal", 24, "79"), false},
		{"another class", h("NIC", "GpuXidError", 24, "79"), false},
		{"another action", h("GPU", "GpuXidError", 5, "79"), false},
		{"no health cause (ProvisioningHealthy)", nil, false},
	} {
		trig.CauseHealth = c.cause
		if _, ok := matchRule(rules, trig); ok != c.want {
			t.Errorf("%s: matched %v, want %v", c.name, ok, c.want)
		}
	}
	_, err = Parse([]byte(`
policy:
  default:
    rules:
      - name: bad
        health: {checks: ["Gpu Xid"], recommendedActions: [REBOOT]}
      - name: empty
        health: {}
`))
	for _, want := range []string{"rules[0].health.checks", "rules[0].health.recommendedActions", "rules[1].health: give at least one"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to name %s", err, want)
		}
	}
}

// TestHealthRuleFatal: a rule's health.fatal, when given, must equal the
// condition's fatal flag; absent, either matches (the behaviour before the
// key existed); fatal alone is a valid match; fatal: false is warned about
// (only a fatal condition makes FAULTED); a non-boolean is refused.
func TestHealthRuleFatal(t *testing.T) {
	f, err := Parse([]byte(`
policy:
  default:
    enabled: true
    rules:
      - {name: fatal-gpu, to: [FAULTED], holdDown: 10m, health: {componentClasses: [GPU], fatal: true}}
      - {name: nonfatal-gpu, to: [FAULTED], holdDown: 10m, health: {componentClasses: [GPU], fatal: false}}
      - {name: any-gpu, to: [FAULTED], holdDown: 10m, health: {componentClasses: [GPU]}}
      - {name: any-fatal, to: [FAULTED], holdDown: 10m, health: {fatal: true}}
`))
	if err != nil {
		t.Fatal(err)
	}
	rules := f.Effective("s").Rules
	if rules[0].Health.Fatal == nil || !*rules[0].Health.Fatal || rules[1].Health.Fatal == nil || *rules[1].Health.Fatal || rules[2].Health.Fatal != nil {
		t.Fatalf("parsed fatal: %v %v %v, want true, false, unset", rules[0].Health.Fatal, rules[1].Health.Fatal, rules[2].Health.Fatal)
	}
	gpu := func(fatal bool) *condition.Health {
		return &condition.Health{ComponentClass: "GPU", CheckName: "GpuXidError", ErrorCodes: []string{"79"}, Fatal: fatal}
	}
	nic := &condition.Health{ComponentClass: "NIC", CheckName: "LinkDown", Fatal: true}
	for _, c := range []struct {
		name  string
		rule  int
		cause *condition.Health
		want  bool
	}{
		{"fatal: true, fatal GPU", 0, gpu(true), true},
		{"fatal: true, non-fatal GPU", 0, gpu(false), false},
		{"fatal: false, fatal GPU", 1, gpu(true), false},
		{"fatal: false, non-fatal GPU", 1, gpu(false), true},
		{"no fatal key, fatal GPU", 2, gpu(true), true},
		{"no fatal key, non-fatal GPU", 2, gpu(false), true},
		{"fatal alone, fatal NIC", 3, nic, true},
		{"fatal alone, no health cause", 3, nil, false},
	} {
		if got := rules[c.rule].Health.Matches(c.cause); got != c.want {
			t.Errorf("%s: matched %v, want %v", c.name, got, c.want)
		}
	}
	trig := Trigger{From: status.Available, To: status.Faulted, CauseReason: condition.ReasonFatalError, CauseHealth: gpu(true)}
	if r, ok := matchRule(rules[1:], trig); !ok || r.Name != "any-gpu" {
		t.Errorf("a fatal GPU fault against [nonfatal-gpu any-gpu ...]: matched %q %v, want any-gpu", r.Name, ok)
	}
	ws := f.Warnings(0, time.Now())
	if len(ws) != 1 || !strings.HasPrefix(ws[0], "default.rules[1] (nonfatal-gpu): health.fatal is false") {
		t.Errorf("warnings %q, want one for nonfatal-gpu", ws)
	}
	_, err = Parse([]byte(`
policy:
  default:
    rules:
      - {name: bad, health: {checks: [GpuXidError], fatal: sometimes}}
`))
	if err == nil || !strings.Contains(err.Error(), "`sometimes` into bool") {
		t.Errorf("fatal: sometimes: %v, want refused as not a boolean", err)
	}
}

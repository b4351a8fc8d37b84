package policy

import (
	"strings"
	"testing"

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

package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/status"
)

// A validation rule matches failed runs by their failing checks ("*":
// any), never a status trigger; the file refuses one without a ladder,
// without checks, with a bad name or with the status-trigger keys.
func TestValidationRules(t *testing.T) {
	f, err := Parse([]byte(`
policy:
  default:
    enabled: true
    rules:
      - name: burn-in
        validation: {checks: [gpu-burn, hardware-profile]}
        remediation: {steps: [{action: REBOOT, timeout: 10m}]}
      - name: any-failure
        validation: {checks: ["*"]}
        remediation: {steps: [{action: INSPECT, timeout: 1h}]}
      - name: faulted
        to: [FAULTED]
`))
	if err != nil {
		t.Fatal(err)
	}
	p := f.Effective("site-a")
	for _, tc := range []struct {
		failing []string
		want    string
	}{
		{[]string{"nccl", "hardware-profile"}, "burn-in"},
		{[]string{"operation"}, "any-failure"},
		{nil, ""},
	} {
		r, ok := MatchValidation(p, tc.failing)
		if r.Name != tc.want || ok != (tc.want != "") {
			t.Errorf("%v: rule %q, want %q", tc.failing, r.Name, tc.want)
		}
	}
	r, ok := matchRule(p.Rules, Trigger{From: status.Available, To: status.Faulted, CauseReason: "DeployFailed", CauseSince: time.Now()})
	if !ok || r.Name != "faulted" {
		t.Errorf("status trigger matched %q, want faulted (validation rules never match one)", r.Name)
	}
	if w := f.Warnings(3*time.Minute, time.Now()); len(w) != 1 || !strings.Contains(w[0], "(faulted)") {
		t.Errorf("warnings %q, want the hold-down one of faulted only", w)
	}

	_, err = Parse([]byte(`
policy:
  default:
    rules:
      - name: no-ladder
        validation: {checks: [gpu-burn]}
      - name: no-checks
        validation: {}
        remediation: {steps: [{action: REBOOT, timeout: 10m}]}
      - name: mixed
        validation: {checks: ["bad name"]}
        to: [FAULTED]
        holdDown: 1m
        remediation: {steps: [{action: REBOOT, timeout: 10m}]}
`))
	for _, want := range []string{
		"default.rules[0].validation: requires remediation",
		"default.rules[1].validation.checks: required",
		`default.rules[2].validation.checks: "bad name" must be`,
		"default.rules[2].to: not allowed with validation",
		"default.rules[2].holdDown: not allowed with validation",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to name %q", err, want)
		}
	}
}

package policyapi_test

import (
	"slices"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/policyapi"
)

// GetEffectivePolicy shows a validation rule's checks, and no statuses.
func TestValidationRuleToProto(t *testing.T) {
	f, err := policy.Parse([]byte(`
policy:
  default:
    enabled: true
    rules:
      - name: burn-in
        validation: {checks: [gpu-burn, hardware-profile]}
        remediation: {steps: [{action: REBOOT, timeout: 10m}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	r := policyapi.PolicyToProto("site-a", f, time.Now()).GetRules()[0]
	if !slices.Equal(r.GetValidationChecks(), []string{"gpu-burn", "hardware-profile"}) || len(r.GetFromStatuses())+len(r.GetToStatuses()) != 0 {
		t.Errorf("rule %v", r)
	}
}

// GetEffectivePolicy shows a health rule's fatal key when given, and leaves
// it unset when not.
func TestHealthRuleFatalToProto(t *testing.T) {
	f, err := policy.Parse([]byte(`
policy:
  default:
    enabled: true
    rules:
      - {name: fatal-gpu, to: [FAULTED], health: {componentClasses: [GPU], fatal: true}}
      - {name: any-gpu, to: [FAULTED], health: {componentClasses: [GPU]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	rs := policyapi.PolicyToProto("site-a", f, time.Now()).GetRules()
	if h := rs[0].GetHealth(); h == nil || h.Fatal == nil || !h.GetFatal() {
		t.Errorf("fatal-gpu: health %v, want fatal true", h)
	}
	if h := rs[1].GetHealth(); h == nil || h.Fatal != nil {
		t.Errorf("any-gpu: health %v, want fatal unset", h)
	}
}

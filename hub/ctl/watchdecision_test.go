package ctl

import (
	"strings"
	"testing"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// TestWatchDecisionLineNamesRuleOnce: a policy quarantine's detail repeats the rule and the
// transition ("rule R: FROM → TO, ..."); the watch line names them once and keeps the rest.
func TestWatchDecisionLineNamesRuleOnce(t *testing.T) {
	e := &ironlinkv1.FleetEvent{Change: &ironlinkv1.FleetEvent_PolicyDecision{PolicyDecision: &ironlinkv1.PolicyDecisionEvent{
		DeviceName: "node-026",
		Decision: &ironlinkv1.PolicyDecision{
			Site: "demo", Rule: "gpu-fatal", Reason: "RuleMatched",
			Action:     ironlinkv1.PolicyAction_POLICY_ACTION_QUARANTINE,
			FromStatus: "AVAILABLE", ToStatus: "FAULTED",
			Detail: "rule gpu-fatal: AVAILABLE → FAULTED, health.GPU/SysLogsXIDError=FatalError",
		},
	}}}
	line := policyOrOperationLine(e, false)
	if n := strings.Count(line, "gpu-fatal"); n != 1 {
		t.Errorf("rule named %d times, want once: %q", n, line)
	}
	if !strings.Contains(line, "AVAILABLE -> FAULTED, health.GPU/SysLogsXIDError=FatalError") {
		t.Errorf("line lost the detail: %q", line)
	}
}

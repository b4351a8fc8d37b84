package store_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/ironlink/ironlink/hub/store"
)

// TestPolicyQuarantineReasonNamesTheRuleOnce: the quarantine a policy
// decision makes is recorded as "policy rule NAME: <detail> (decision N)",
// with the detail's own leading "rule NAME: " dropped (describe device
// showed "policy rule gpu-fatal: rule gpu-fatal: AVAILABLE → FAULTED …").
func TestPolicyQuarantineReasonNamesTheRuleOnce(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	_, devs := opSite(t, s, "site-a", 1)
	d, recorded, err := s.RecordPolicyDecision(ctx, store.PolicyDecision{DeviceID: devs[0], Site: "site-a",
		Kind: store.DecisionKindQuarantine, TriggerID: 1, Action: "QUARANTINE", Reason: "RuleMatched", Rule: "gpu-fatal",
		Detail: "rule gpu-fatal: AVAILABLE → FAULTED, health.GPU/SysLogsXIDError=FatalError"})
	if err != nil || !recorded || d.CommandID == "" {
		t.Fatalf("decision: %+v recorded %v: %v", d, recorded, err)
	}
	cmd, err := s.GetCommand(ctx, d.CommandID)
	if err != nil {
		t.Fatal(err)
	}
	want := "policy rule gpu-fatal: AVAILABLE → FAULTED, health.GPU/SysLogsXIDError=FatalError (decision " + strconv.FormatInt(d.ID, 10) + ")"
	if cmd.Reason != want {
		t.Errorf("reason %q, want %q", cmd.Reason, want)
	}
}

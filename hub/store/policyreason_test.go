package store_test

import (
	"context"
	"errors"
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

// TestResolveTwiceSaysAlreadyResolved: approving or rejecting an action
// that is no longer pending says which state it is in and that it was
// resolved already (was "… is REJECTED: pending action is not pending").
func TestResolveTwiceSaysAlreadyResolved(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	_, devs := opSite(t, s, "site-a", 1)
	d, _, err := s.RecordPolicyDecision(ctx, store.PolicyDecision{DeviceID: devs[0], Site: "site-a",
		Kind: store.DecisionKindQuarantine, TriggerID: 1, Action: "PENDING", Reason: "HeldByGuard", Rule: "gpu-fatal"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResolvePendingActions(ctx, []int64{d.PendingID}, false, "ops", "not now"); err != nil {
		t.Fatal(err)
	}
	_, err = s.ResolvePendingActions(ctx, []int64{d.PendingID}, true, "ops", "after all")
	want := "pending action " + strconv.FormatInt(d.PendingID, 10) + " is REJECTED: already resolved: only a PENDING action can be approved or rejected"
	if !errors.Is(err, store.ErrNotPending) || err.Error() != want {
		t.Errorf("second resolve: %v, want %q", err, want)
	}
}

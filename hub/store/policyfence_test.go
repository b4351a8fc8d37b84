package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ironlink/ironlink/hub/store"
)

// TestPolicyFenceRefusesAnOldLeader: once another replica took the
// evaluator's lead (TakePolicyLead bumped the epoch), the writes of a pass
// under the old epoch are refused with ErrPolicyFenced and write nothing;
// the new leader's go through.
func TestPolicyFenceRefusesAnOldLeader(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	old, err := s.TakePolicyLead(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ExpirePendingActions(store.WithPolicyFence(ctx, old)); err != nil {
		t.Fatalf("the leader's write: %v", err)
	}
	cur, err := s.TakePolicyLead(ctx, "r2")
	if err != nil {
		t.Fatal(err)
	}
	if cur != old+1 {
		t.Fatalf("epochs %d then %d, want consecutive", old, cur)
	}
	if _, err := s.ExpirePendingActions(store.WithPolicyFence(ctx, old)); !errors.Is(err, store.ErrPolicyFenced) {
		t.Errorf("the old leader's ExpirePendingActions: %v, want ErrPolicyFenced", err)
	}
	if _, err := s.RearmGuard(store.WithPolicyFence(ctx, old), "site-a"); !errors.Is(err, store.ErrPolicyFenced) {
		t.Errorf("the old leader's RearmGuard: %v, want ErrPolicyFenced", err)
	}
	if _, _, err := s.RecordPolicyDecision(store.WithPolicyFence(ctx, old), store.PolicyDecision{}); !errors.Is(err, store.ErrPolicyFenced) {
		t.Errorf("the old leader's RecordPolicyDecision: %v, want ErrPolicyFenced", err)
	}
	if _, err := s.RearmGuard(store.WithPolicyFence(ctx, cur), "site-a"); err != nil {
		t.Errorf("the new leader's RearmGuard: %v", err)
	}
}

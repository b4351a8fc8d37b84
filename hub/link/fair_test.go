package link

import "testing"

// TestLinkShare: a link alone keeps up to FairWriteBudget device updates in
// the committer; beside another active link, half; a write is always
// admitted when the link has none in flight, however large; the replica's
// count of active links follows the first start and the last finish, and
// release forgets a link's writes.
func TestLinkShare(t *testing.T) {
	var w writeShares
	a := &linkShare{shares: &w}
	b := &linkShare{shares: &w}
	if !a.admit(FairWriteBudget * 3) {
		t.Fatal("a write larger than the budget was not admitted with nothing in flight")
	}
	a.started(500)
	for i := 1; a.admit(500); i++ {
		a.started(500)
		if i > 10 {
			t.Fatal("admitted without bound")
		}
	}
	if a.devices != FairWriteBudget || w.active.Load() != 1 {
		t.Fatalf("alone: %d devices in flight, %d active links; want %d, 1", a.devices, w.active.Load(), FairWriteBudget)
	}
	b.started(1)
	if w.active.Load() != 2 || a.admit(1) {
		t.Fatalf("beside another link: %d active, admitted over its half", w.active.Load())
	}
	for range 3 {
		a.finished()
	}
	if a.devices != 500 || !a.admit(FairWriteBudget/2-500) || a.admit(FairWriteBudget/2-500+1) {
		t.Fatalf("after three finished: %d in flight; want 500 and room for exactly half the budget", a.devices)
	}
	b.finished()
	if w.active.Load() != 1 {
		t.Fatalf("%d active links after b finished, want 1", w.active.Load())
	}
	a.release()
	a.release()
	if w.active.Load() != 0 || a.devices != 0 {
		t.Fatalf("after release: %d active, %d devices", w.active.Load(), a.devices)
	}
}

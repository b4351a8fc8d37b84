package periodic

import (
	"context"
	"testing"
	"time"
)

// Every keeps calling until the context ends, and returns then.
func TestEveryCallsUntilTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func() {
			if calls++; calls == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return after its context ended")
	}
	if calls != 3 {
		t.Fatalf("fn called %d times after the context ended at the third call, want 3", calls)
	}
}

// Every waits one interval before the first call; NowAndEvery calls at once.
func TestNowAndEveryCallsAtOnceEveryWaits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now := 0
	NowAndEvery(ctx, time.Hour, func() { now++; cancel() })
	if now != 1 {
		t.Fatalf("NowAndEvery called fn %d times before its first tick, want 1", now)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	later := 0
	Every(ctx2, time.Hour, func() { later++ })
	if later != 0 {
		t.Fatalf("Every called fn %d times before its first tick, want 0", later)
	}
}

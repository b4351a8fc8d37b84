package reporterlimit

import (
	"testing"
	"time"
)

// TestFloodDoesNotStarveOthers: a reporter that sends far above its rate
// is refused with a retry time, another reporter keeps its whole burst,
// a refused batch takes nothing, and the flooder gets its rate back.
func TestFloodDoesNotStarveOthers(t *testing.T) {
	l := New(10, 20)
	now := time.Unix(1000, 0)
	refused := 0
	for range 100 {
		if ok, _, _ := l.Take(map[string]int{"flood": 5}, now); !ok {
			refused++
		}
	}
	if refused != 96 {
		t.Errorf("flood: %d of 100 batches of 5 refused, want 96 (burst 20)", refused)
	}
	ok, over, after := l.Take(map[string]int{"flood": 1}, now)
	if ok || over != "flood" || after <= 0 {
		t.Errorf("flood once more: ok=%v over=%q after=%s, want refused with a wait", ok, over, after)
	}
	if ok, _, _ := l.Take(map[string]int{"quiet": 20}, now); !ok {
		t.Error("another reporter's full burst refused while one floods")
	}
	// All or none: quiet2 is not charged when flood refuses the batch.
	if ok, _, _ := l.Take(map[string]int{"quiet2": 20, "flood": 1}, now); ok {
		t.Error("a batch with the flooder was taken")
	}
	if ok, _, _ := l.Take(map[string]int{"quiet2": 20}, now); !ok {
		t.Error("a refused batch charged its other reporter")
	}
	if ok, _, _ := l.Take(map[string]int{"flood": 10}, now.Add(time.Second)); !ok {
		t.Error("the flooder did not get its rate back after a second")
	}
	var off *Limiter
	if ok, _, _ := off.Take(map[string]int{"x": 1e6}, now); !ok {
		t.Error("a nil limiter refused")
	}
}

func TestKeysBounded(t *testing.T) {
	l := New(1, 1)
	now := time.Unix(1000, 0)
	for i := range MaxKeys + 10 {
		l.Take(map[string]int{string(rune(0x1000 + i)): 1}, now)
	}
	if n := len(l.buckets); n > MaxKeys+1 {
		t.Errorf("%d buckets, want at most %d", n, MaxKeys+1)
	}
}

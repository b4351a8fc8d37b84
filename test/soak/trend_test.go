//go:build soak

package soak

import (
	"math"
	"testing"
	"time"
)

// TestTrendSeparatesLinksFromTime: the memory invariant's fit (trend)
// reports no growth for goroutines that step with the number of links
// held (5 a link, links moving 3 → 2 → 3 → 5 as in a 5-minute soak), and
// reports a leak of 20 % over the span even while links step too.
func TestTrendSeparatesLinksFromTime(t *testing.T) {
	t0 := time.Unix(0, 0)
	var flat, leak []sample
	for i := range 48 {
		links := []int{3, 2, 3, 5}[i*4/48]
		wobble := float64(i%3) - 1
		at := t0.Add(time.Duration(i) * 5 * time.Second)
		flat = append(flat, sample{at: at, links: links, goroutines: 35 + 5*float64(links) + wobble})
		leak = append(leak, sample{at: at, links: links, goroutines: 35 + 5*float64(links) + wobble + 10*float64(i)/47})
	}
	g := func(x sample) float64 { return x.goroutines }
	perLink, growth, mean := trend(flat, g)
	if math.Abs(perLink-5) > 0.5 || math.Abs(100*growth/mean) > 2 {
		t.Errorf("flat: %+.2f a link, growth %+.2f (%.1f %% of %.1f); want 5 a link, ~0 growth", perLink, growth, 100*growth/mean, mean)
	}
	_, growth, mean = trend(leak, g)
	if pct := 100 * growth / mean; pct < 15 {
		t.Errorf("leak of 10 goroutines (~20 %%) reported as %+.1f %%", pct)
	}
	one := flat[:10] // one number of links throughout
	if b, growth, _ := trend(one, g); b != 0 || math.Abs(growth) > 2 {
		t.Errorf("one link count: %+.2f a link, growth %+.2f; want 0, ~0", b, growth)
	}
}

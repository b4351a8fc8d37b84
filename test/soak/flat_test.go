//go:build soak

package soak

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ironlink/ironlink/internal/promtest"
)

// hubSamples are hub-a's /metrics over time.
type hubSamples struct {
	mu      sync.Mutex
	samples []sample
}

type sample struct {
	at         time.Time
	links      int // links hub-a holds
	goroutines float64
	heap       float64
}

// sampleHub reads hub-a's goroutines and heap in use from its /metrics,
// with the number of links it holds (from the sites table): each link has
// its own goroutines, and the faults move links between the replicas.
func (h *hubSamples) sampleHub(ctx context.Context, pool *pgxpool.Pool, admin, replica string) {
	page, err := promtest.TryScrape("http://" + admin + "/metrics")
	if err != nil {
		return
	}
	var links int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM sites WHERE link_replica = $1`, replica).Scan(&links); err != nil {
		return
	}
	g, ok1 := page.Value("go_goroutines")
	hp, ok2 := page.Value("go_memstats_heap_inuse_bytes")
	if ok1 && ok2 {
		h.mu.Lock()
		h.samples = append(h.samples, sample{at: time.Now(), links: links, goroutines: g, heap: hp})
		h.mu.Unlock()
	}
}

// sameLinks keeps the samples of early and late taken while the hub held
// the number of links most common in late that early has too (all of
// them when there is none), so that goroutines are compared like for like.
func sameLinks(early, late []sample) ([]sample, []sample) {
	count := map[int]int{}
	for _, x := range late {
		count[x.links]++
	}
	best, bestN := -1, 0
	for _, x := range early {
		if n := count[x.links]; n > bestN {
			best, bestN = x.links, n
		}
	}
	if best < 0 {
		return early, late
	}
	keep := func(xs []sample) []sample {
		var out []sample
		for _, x := range xs {
			if x.links == best {
				out = append(out, x)
			}
		}
		return out
	}
	return keep(early), keep(late)
}

// flat checks the hub's samples after warm-up: the last quarter of the
// run is within ±10 % of the first half after warm-up, for the minimum of
// heap in use, and for the median of goroutines among the samples taken
// with the same number of links held (sameLinks).
func (h *hubSamples) flat(c *checker, warm time.Time) (string, []string) {
	h.mu.Lock()
	var s []sample
	for _, x := range h.samples {
		if x.at.After(warm) {
			s = append(s, x)
		}
	}
	h.mu.Unlock()
	if len(s) < 8 {
		return "too few samples", []string{fmt.Sprintf("%d samples after warm-up, want ≥ 8", len(s))}
	}
	early, late := s[:len(s)/2], s[len(s)-len(s)/4:]
	gEarly, gLate := sameLinks(early, late)
	// pick is the median (goroutines) or the minimum (heap in use: its
	// floor, the live heap after a collection; between collections it
	// swings up to GOGC's 2×).
	pick := func(xs []sample, f func(sample) float64, median bool) float64 {
		v := make([]float64, len(xs))
		for i, x := range xs {
			v[i] = f(x)
		}
		sort.Float64s(v)
		if median {
			return v[len(v)/2]
		}
		return v[0]
	}
	var bad []string
	var figs string
	for _, m := range []struct {
		name        string
		early, late []sample
		f           func(sample) float64
		median      bool
	}{{fmt.Sprintf("goroutines (median, at %d links)", gLate[0].links), gEarly, gLate, func(x sample) float64 { return x.goroutines }, true},
		{"heap in use (minimum)", early, late, func(x sample) float64 { return x.heap }, false}} {
		a, b := pick(m.early, m.f, m.median), pick(m.late, m.f, m.median)
		figs += fmt.Sprintf("%s %.0f → %.0f (%+.1f %%); ", m.name, a, b, 100*(b-a)/a)
		if b > a*1.1 || b < a*0.9 {
			bad = append(bad, fmt.Sprintf("%s: %.0f after warm-up, %.0f at the end", m.name, a, b))
		}
	}
	c.record(invFlat, len(s), bad...)
	return figs, bad
}

//go:build soak

package soak

import (
	"context"
	"fmt"
	"io"
	"net/http"
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
	heap       float64 // live heap: go_gc_heap_live_bytes, read right after a forced collection
	inuse      float64 // heap in use (go_memstats_heap_inuse_bytes) at the same scrape, for comparison
	rss        float64 // process_resident_memory_bytes, reported
}

// sampleHub reads hub-a's goroutines and live heap from its /metrics,
// with the number of links it holds (from the sites table): each link has
// its own goroutines, and the faults move links between the replicas.
//
// The heap is go_gc_heap_live_bytes, the heap the last collection found
// live, read right after a collection that sampleHub forces (hub-a runs
// with --admin-pprof: /debug/pprof/heap?gc=1 runs runtime.GC): the live
// heap at a known moment. The memstats' figures are no floor:
// go_memstats_heap_inuse_bytes, read at any moment, is somewhere in GOGC's
// 1×–2× saw-tooth, and even right after a collection both it and
// go_memstats_heap_alloc_bytes hold the garbage the /metrics scrape itself
// makes while its collectors run (measured: ~7.5 MB against 4.1 MB live on
// a heap profile, varying by ±1 MB from one scrape to the next). A sample
// whose collection failed is not taken.
func (h *hubSamples) sampleHub(ctx context.Context, pool *pgxpool.Pool, admin, replica string) {
	if err := forceGC(ctx, admin); err != nil {
		return
	}
	page, err := promtest.TryScrape("http://" + admin + "/metrics")
	if err != nil {
		return
	}
	var links int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM sites WHERE link_replica = $1`, replica).Scan(&links); err != nil {
		return
	}
	g, ok1 := page.Value("go_goroutines")
	hp, ok2 := page.Value("go_gc_heap_live_bytes")
	hi, ok3 := page.Value("go_memstats_heap_inuse_bytes")
	rss, _ := page.Value("process_resident_memory_bytes")
	if ok1 && ok2 && ok3 {
		h.mu.Lock()
		h.samples = append(h.samples, sample{at: time.Now(), links: links, goroutines: g, heap: hp, inuse: hi, rss: rss})
		h.mu.Unlock()
	}
}

// floorEvery is how many consecutive samples (5 s apart) floors takes
// the lowest of.
const floorEvery = 4

// floors returns, of each run of floorEvery consecutive samples taken at
// one number of links, the one with the lowest f: a live heap sample also
// holds whatever work was in flight when the collection ran (a policy
// tick's query rows, a batch being committed: up to ~300 kB of a 4 MB
// heap), and the floor is what a leak raises.
func floors(xs []sample, f func(sample) float64) []sample {
	var out []sample
	for i := 0; i < len(xs); {
		j, low := i, i
		for j < len(xs) && j-i < floorEvery && xs[j].links == xs[i].links {
			if f(xs[j]) < f(xs[low]) {
				low = j
			}
			j++
		}
		out = append(out, xs[low])
		i = j
	}
	return out
}

// trend fits v = a + b·links + c·t (t in seconds since the first sample)
// by least squares and returns the fitted per-link cost b, the growth c
// over the samples' span (c × span, at a constant number of links) and
// the mean of v. Fitting links apart from time is what makes the
// comparison like for like: each link has its goroutines and its memory
// (the HTTP/2 transport's buffers, the link's queue), and the faults move
// links between the replicas at random, so the raw figures step with the
// number of links hub-a holds (measured: 45-51 goroutines at 2 links,
// 60-65 at 5). When every sample has the same number of links, b is 0 and
// the fit is v = a + c·t.
func trend(xs []sample, f func(sample) float64) (perLink, growth, mean float64) {
	n := float64(len(xs))
	t0 := xs[0].at
	var sl, st, sv float64
	for _, x := range xs {
		sl += float64(x.links)
		st += x.at.Sub(t0).Seconds()
		sv += f(x)
	}
	ml, mt, mv := sl/n, st/n, sv/n
	// Centred normal equations in (b, c).
	var sll, stt, slt, slv, stv float64
	for _, x := range xs {
		l, t, v := float64(x.links)-ml, x.at.Sub(t0).Seconds()-mt, f(x)-mv
		sll += l * l
		stt += t * t
		slt += l * t
		slv += l * v
		stv += t * v
	}
	span := xs[len(xs)-1].at.Sub(t0).Seconds()
	if stt == 0 {
		return 0, 0, mv
	}
	det := sll*stt - slt*slt
	if sll == 0 || det <= 1e-9*sll*stt {
		// One number of links throughout (or links in step with time:
		// then time takes it all, the stricter reading).
		return 0, stv / stt * span, mv
	}
	b := (slv*stt - stv*slt) / det
	c := (stv*sll - slv*slt) / det
	return b, c * span, mv
}

// flat checks the hub's samples after warm-up: for the floors (floors) of
// goroutines and of the live heap, the growth over the samples' span at a
// constant number of links (trend) is within ±10 % of their mean. Heap in
// use and RSS are reported, not checked (see sampleHub).
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
	span := s[len(s)-1].at.Sub(s[0].at).Round(time.Second)
	var bad []string
	var figs string
	for _, m := range []struct {
		name    string
		f       func(sample) float64
		floor   bool
		checked bool
	}{{"goroutines (floors)", func(x sample) float64 { return x.goroutines }, true, true},
		{"live heap (floors)", func(x sample) float64 { return x.heap }, true, true},
		{"heap in use (floors, not checked)", func(x sample) float64 { return x.inuse }, true, false},
		{"RSS (not checked)", func(x sample) float64 { return x.rss }, false, false}} {
		xs := s
		if m.floor {
			xs = floors(s, m.f)
		}
		perLink, growth, mean := trend(xs, m.f)
		pct := 100 * growth / mean
		figs += fmt.Sprintf("%s mean %.0f, %+.0f a link, %+.1f %% over %s at constant links; ", m.name, mean, perLink, pct, span)
		if m.checked && (pct > 10 || pct < -10) {
			bad = append(bad, fmt.Sprintf("%s: %+.0f (%+.1f %% of the mean %.0f) over %s at constant links", m.name, growth, pct, mean, span))
		}
	}
	c.record(invFlat, len(s), bad...)
	return figs, bad
}

// forceGC has the hub at admin run a full collection (its heap profile
// with ?gc=1; the profile itself is discarded).
func forceGC(ctx context.Context, admin string) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, "http://"+admin+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return fmt.Errorf("force GC: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("force GC: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("force GC: %s", resp.Status)
	}
	return nil
}

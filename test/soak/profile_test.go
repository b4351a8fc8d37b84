//go:build soak

package soak

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

var profileDir = flag.String("soak.profiles", os.Getenv("SOAK_PROFILES"),
	"when set, hub-a serves Go's profiler (--admin-pprof) and the soak writes its heap profile (after a collection) there every minute, heap-MM.pb.gz (default $SOAK_PROFILES); compare two with go tool pprof -base")

// profileFlags are hub-a's extra flags: --admin-pprof, for the
// collection the memory sampler forces (forceGC) and the heap profiles.
func profileFlags() []string { return []string{"--admin-pprof"} }

// heapProfiles writes hub-a's heap profile (?gc=1: taken after a
// collection, so it shows the live heap) to -soak.profiles every minute
// until ctx ends, and once more at the end.
func heapProfiles(ctx context.Context, admin string, start time.Time) {
	if *profileDir == "" {
		return
	}
	_ = os.MkdirAll(*profileDir, 0o755)
	take := func(name string) {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(cctx, http.MethodGet, "http://"+admin+"/debug/pprof/heap?gc=1", nil)
		if err != nil {
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			return
		}
		_ = os.WriteFile(filepath.Join(*profileDir, name), b, 0o644)
	}
	for ctx.Err() == nil {
		take(fmt.Sprintf("heap-%02d.pb.gz", int(time.Since(start).Minutes())))
		sleep(ctx, time.Minute)
	}
	take("heap-end.pb.gz")
}

// writeSamples writes hub-a's memory samples to -soak.profiles as
// samples.tsv (seconds since start, links held, goroutines, live heap, heap
// in use and resident set in bytes), when that flag is set.
func (h *hubSamples) writeSamples(start time.Time) {
	if *profileDir == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	b := []byte("seconds\tlinks\tgoroutines\tlive_heap\theap_inuse\trss\n")
	for _, x := range h.samples {
		b = fmt.Appendf(b, "%.0f\t%d\t%.0f\t%.0f\t%.0f\t%.0f\n", x.at.Sub(start).Seconds(), x.links, x.goroutines, x.heap, x.inuse, x.rss)
	}
	_ = os.WriteFile(filepath.Join(*profileDir, "samples.tsv"), b, 0o644)
}

package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Profiles of the hub under load (issue 26 item 2): with -bench.profile
// DIR, the hub serves Go's profiler on its admin listener (--admin-pprof)
// and the load benchmarks save, for the measured duration, its CPU
// profile and its allocation profile at the start and at the end
// (compare them with `go tool pprof -sample_index=alloc_space
// -base allocs-start.pb.gz allocs-end.pb.gz`), plus the goroutines at the
// end, into DIR/<name>-{cpu,allocs-start,allocs-end,goroutine}.pb.gz.

var flagProfile = flag.String("bench.profile", "", "directory where the hub's CPU and allocation profiles over the measured duration are saved (empty: none)")

// profileArgs returns the hub flags that -bench.profile needs.
func profileArgs() []string {
	if *flagProfile == "" {
		return nil
	}
	return []string{"--admin-pprof"}
}

// hubProfiler saves the hub's profiles of one measured duration.
type hubProfiler struct {
	tb    testing.TB
	base  string // http://admin/debug/pprof/
	dir   string
	name  string
	cpuOK chan struct{}
}

// startProfile begins the hub's CPU profile over d and saves its
// allocation profile as the start; nil when -bench.profile is unset.
func startProfile(tb testing.TB, adminAddr, name string, d time.Duration) *hubProfiler {
	if *flagProfile == "" {
		return nil
	}
	if err := os.MkdirAll(*flagProfile, 0o755); err != nil {
		tb.Fatal(err)
	}
	p := &hubProfiler{tb: tb, base: "http://" + adminAddr + "/debug/pprof/", dir: *flagProfile, name: name, cpuOK: make(chan struct{})}
	p.save("allocs", "allocs-start", 0)
	secs := max(int(d/time.Second), 1)
	go func() {
		defer close(p.cpuOK)
		p.save(fmt.Sprintf("profile?seconds=%d", secs), "cpu", time.Duration(secs+60)*time.Second)
	}()
	return p
}

// stop saves the end's allocation and goroutine profiles and waits for
// the CPU profile.
func (p *hubProfiler) stop() {
	if p == nil {
		return
	}
	p.save("allocs", "allocs-end", 0)
	p.save("goroutine", "goroutine", 0)
	<-p.cpuOK
	fmt.Printf("ironlink hub profiles: %s/%s-*.pb.gz\n", p.dir, p.name)
}

// save fetches one profile into dir/name-what.pb.gz; a failure is logged.
func (p *hubProfiler) save(path, what string, timeout time.Duration) {
	if timeout == 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.tb.Logf("profile %s: %v", what, err)
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		p.tb.Logf("profile %s: status %d, %v", what, resp.StatusCode, err)
		return
	}
	if err := os.WriteFile(filepath.Join(p.dir, p.name+"-"+what+".pb.gz"), b, 0o644); err != nil {
		p.tb.Logf("profile %s: %v", what, err)
	}
}

package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

// Idle links (issue 11 items 4 and 7): many satellites linked to one
// replica, each on its own TCP connection as real satellites are, saying
// nothing but heartbeats. What is measured is the hub process's resident
// memory (VmRSS of /proc/<pid>/status) and CPU while they idle, against the
// same hub's own figures with no link, measured first in the same run.

var (
	flagIdleLinks    = flag.Int("bench.idle-links", 10000, "idle links for BenchmarkIdleLinks (one TCP connection each)")
	flagIdleSettle   = flag.Duration("bench.idle-settle", 20*time.Second, "how long the idle links are held before the hub's RSS and CPU are read")
	flagIdleSample   = flag.String("bench.idle-sample", "", "comma-separated times after the last idle link opened, each shorter than -bench.idle-settle, at which the hub's RSS and KiB per link are printed too (e.g. 1m)")
	flagIdleMemLimit = flag.String("bench.idle-gomemlimit", "", "GOMEMLIMIT of the hub and the raw gRPC server in BenchmarkIdleLinks: a value as the Go runtime reads it (e.g. 420MiB), or chart:<perLinkKiB> for what the Helm chart sets for -bench.idle-links links (empty: none)")
	flagIdleEnv      = flag.String("bench.idle-env", "", "space-separated NAME=value pairs added to the environment of the hub and the raw gRPC server in BenchmarkIdleLinks (e.g. GODEBUG=adaptivestackstart=0)")
)

// chartBaseMiB is the Helm chart's memory.baseMiB (deploy/charts/hub/values.yaml).
const chartBaseMiB = 32

// chartGoMemLimit is the GOMEMLIMIT in bytes the Helm chart gives a hub
// sized for links idle links at perLinkKiB each: 90 % of the container
// limit ceil((baseMiB + links × perLinkKiB / 1024) / 0.9) MiB
// (docs/design/performance.md "Memory limit").
func chartGoMemLimit(links int, perLinkKiB float64) int64 {
	limitMiB := math.Ceil((chartBaseMiB + float64(links)*perLinkKiB/1024) / 0.9)
	return int64(0.9 * limitMiB * (1 << 20))
}

// idleServerEnv is the environment (NAME=value) -bench.idle-gomemlimit and
// -bench.idle-env add to the hub's and the raw server's processes for n
// links.
func idleServerEnv(tb testing.TB, n int) []string {
	env := strings.Fields(*flagIdleEnv)
	switch v := *flagIdleMemLimit; {
	case v == "":
	case strings.HasPrefix(v, "chart:"):
		k, err := strconv.ParseFloat(strings.TrimPrefix(v, "chart:"), 64)
		if err != nil || k <= 0 {
			tb.Fatalf("-bench.idle-gomemlimit %q: want chart:<perLinkKiB>", v)
		}
		env = append(env, fmt.Sprintf("GOMEMLIMIT=%d", chartGoMemLimit(n, k)))
	default:
		env = append(env, "GOMEMLIMIT="+v)
	}
	for _, kv := range env {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
			tb.Fatalf("-bench.idle-env: %q is not NAME=value", kv)
		}
	}
	if len(env) > 0 {
		fmt.Printf("ironlink idle links: hub and raw server environment %s\n", strings.Join(env, " "))
	}
	return env
}

// withEnv runs f with env (NAME=value) set in this process's environment,
// which the processes f starts inherit, and restores it after.
func withEnv(env []string, f func()) {
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		old, had := os.LookupEnv(name)
		os.Setenv(name, value)
		if had {
			defer os.Setenv(name, old)
		} else {
			defer os.Unsetenv(name)
		}
	}
	f()
}

// idleResult is what one idle-links run measured.
type idleResult struct {
	Links                 int
	BaseRSS, RSS          int64         // bytes: the hub with no link, and with Links idle links
	ConnectTime           time.Duration // until every link had its Welcome
	CPUBase, CPU          float64       // hub CPU (fraction of one core) over the settle window: no link, idle links
	LinkedInDB, Heartbeat int           // sites the database shows linked to the replica; heartbeats sent
	// Go runtime figures of the hub with the idle links (its /metrics):
	// goroutines, heap in use, live heap (marked by the last garbage
	// collection) and goroutine stacks in use, bytes.
	Goroutines, HeapInuse, HeapLive, StackInuse int64
}

// Issue 26 item 3: at most idleTargetMiB of RSS at idleTargetLinks idle
// links after 5 minutes; at another count, the same base (idleTargetBaseMiB,
// the hub with no link) and per-link allowance (42.8 KiB).
const (
	idleTargetMiB     = 450
	idleTargetLinks   = 10000
	idleTargetBaseMiB = 32
)

func (r idleResult) String() string {
	per := float64(r.RSS-r.BaseRSS) / float64(max(r.Links, 1))
	target := idleTargetBaseMiB + float64(r.Links)*(idleTargetMiB-idleTargetBaseMiB)/idleTargetLinks
	return fmt.Sprintf("links=%d connect=%s hub RSS=%.1f MiB (no links: %.1f MiB; per link %.1f KiB; target %.0f MiB: %.0f%% of it) hub CPU idle links=%.1f%% of a core (no links: %.1f%%) linked-in-db=%d heartbeats=%d (hub runtime: %d goroutines, heap in use %.1f MiB, live heap %.1f MiB, stacks %.1f MiB)",
		r.Links, r.ConnectTime.Round(time.Millisecond), mib(r.RSS), mib(r.BaseRSS), per/1024, target, 100*mib(r.RSS)/target, 100*r.CPU, 100*r.CPUBase, r.LinkedInDB, r.Heartbeat,
		r.Goroutines, mib(r.HeapInuse), mib(r.HeapLive), mib(r.StackInuse))
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// raiseNoFile raises this test process's open-file soft limit to the hard
// limit (each link is a connection here too) and fails when it stays
// below need.
func raiseNoFile(tb testing.TB, need uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Fatal(err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			tb.Fatal(err)
		}
	}
	if lim.Cur < need {
		tb.Fatalf("open-file hard limit %d is below the %d this run needs (raise it: ulimit -Hn)", lim.Cur, need)
	}
}

// procRSS returns pid's resident set size in bytes.
func procRSS(tb testing.TB, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// procCPU returns pid's user+system CPU time so far.
func procCPU(tb testing.TB, pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from 3 (state) on
	utime, _ := strconv.ParseInt(f[11], 10, 64)              // field 14
	stime, _ := strconv.ParseInt(f[12], 10, 64)              // field 15
	return time.Duration(utime+stime) * time.Second / 100    // USER_HZ = 100 on Linux
}

// cpuOver returns pid's CPU use over d as a fraction of one core.
func cpuOver(tb testing.TB, pid int, d time.Duration) float64 {
	c0, t0 := procCPU(tb, pid), time.Now()
	time.Sleep(d)
	return float64(procCPU(tb, pid)-c0) / float64(time.Since(t0))
}

// idleLink is one idle satellite link: its own client connection, the
// hello, the welcome, then heartbeats at the hub's interval; everything
// the hub sends is read and dropped.
type idleLink struct {
	cc     *grpc.ClientConn
	beats  *atomic.Int64
	failed *atomic.Int64
}

// dialIdle opens the link of site to addr and returns once the Welcome
// arrived; the link runs until ctx ends.
func dialIdle(ctx context.Context, addr, site string, beats, failed *atomic.Int64) (*idleLink, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithReadBufferSize(4<<10), grpc.WithWriteBufferSize(4<<10),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		return nil, err
	}
	stream, err := ironlinkv1.NewLinkServiceClient(cc).Connect(ctx)
	if err == nil {
		err = stream.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Hello{Hello: &ironlinkv1.Hello{
			Site: site, BootId: "idle-" + site, Version: "bench-idle"}}})
	}
	var w *ironlinkv1.ConnectResponse
	if err == nil {
		w, err = stream.Recv()
	}
	if err == nil && w.GetWelcome() == nil {
		err = fmt.Errorf("first message %T, want a welcome", w.GetMsg())
	}
	if err != nil {
		cc.Close()
		return nil, fmt.Errorf("link %s: %w", site, err)
	}
	every := time.Duration(max(w.GetWelcome().GetHeartbeatIntervalSeconds(), 1)) * time.Second
	l := &idleLink{cc: cc, beats: beats, failed: failed}
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				if ctx.Err() == nil {
					failed.Add(1)
				}
				return
			}
		}
	}()
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if stream.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Heartbeat{
					Heartbeat: &ironlinkv1.Heartbeat{SentTime: timestamppb.Now()}}}) != nil {
					return
				}
				beats.Add(1)
			}
		}
	}()
	return l, nil
}

// idleSet is n idle links opened to one server.
type idleSet struct {
	links         []*idleLink
	beats, failed atomic.Int64
	cancel        context.CancelFunc
	ConnectTime   time.Duration // until every link had its Welcome
}

// close ends every link.
func (s *idleSet) close() {
	s.cancel()
	for _, l := range s.links {
		if l != nil {
			l.cc.Close()
		}
	}
}

// openIdle opens n idle links of sites prefix-00000… to addr, 64 at a
// time, and fails the test when one does not open; they end with the test
// (or close).
func openIdle(tb testing.TB, addr, prefix string, n int) *idleSet {
	ctx, cancel := context.WithCancel(context.Background())
	set := &idleSet{links: make([]*idleLink, n), cancel: cancel}
	var mu sync.Mutex
	var errs []error
	start := time.Now()
	next := make(chan int)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				l, err := dialIdle(ctx, addr, fmt.Sprintf("%s-%05d", prefix, i), &set.beats, &set.failed)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				set.links[i] = l
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	set.ConnectTime = time.Since(start)
	tb.Cleanup(set.close)
	if len(errs) > 0 {
		tb.Fatalf("%d of %d links failed to open; first: %v", len(errs), n, errs[0])
	}
	return set
}

// runIdleRaw measures the raw gRPC ceiling of idle links: the raw link
// server's process (rawgrpc_test.go) alone, then holding n idle links for
// settle; it returns both resident set sizes in bytes.
func runIdleRaw(tb testing.TB, n int, settle time.Duration) (base, rss int64) {
	raiseNoFile(tb, uint64(n)+512)
	p := startRawGRPCProcess(tb, idleServerEnv(tb, n)...)
	time.Sleep(time.Second)
	base = procRSS(tb, p.Pid())
	set := openIdle(tb, p.Addr, "raw", n)
	time.Sleep(settle)
	rss = procRSS(tb, p.Pid())
	if f := set.failed.Load(); f > 0 {
		tb.Fatalf("%d raw idle links ended while idle", f)
	}
	set.close()
	return base, rss
}

// runIdle starts one hub, measures it with no link, opens n idle links
// (64 at a time), holds them for settle and measures it again.
func runIdle(tb testing.TB, n int, settle time.Duration, hubArgs ...string) idleResult {
	raiseNoFile(tb, uint64(n)+512)
	bins := binaries(tb)
	db := pgtest.NewDatabase(tb)
	var hub *harness.Hub
	withEnv(idleServerEnv(tb, n), func() {
		hub = harness.StartHub(tb, bins, db, "idle", append(append([]string{"--log-level", "warn"}, profileArgs()...), hubArgs...)...)
	})
	pool := harness.Pool(tb, db)
	res := idleResult{Links: n}
	window := min(settle, 10*time.Second)
	res.CPUBase = cpuOver(tb, hub.Pid(), window)
	res.BaseRSS = procRSS(tb, hub.Pid())
	samples := idleSamples(tb, settle)
	set := openIdle(tb, hub.Addr, "idle", n)
	opened := time.Now()
	res.ConnectTime = set.ConnectTime
	for _, d := range samples {
		time.Sleep(time.Until(opened.Add(d)))
		rss := procRSS(tb, hub.Pid())
		fmt.Printf("ironlink idle links after %s: links=%d hub RSS=%.1f MiB (no links: %.1f MiB; per link %.1f KiB) (hub runtime: %d goroutines, heap in use %.1f MiB, live heap %.1f MiB, stacks %.1f MiB)\n",
			shortDuration(d), n, mib(rss), mib(res.BaseRSS), float64(rss-res.BaseRSS)/float64(n)/1024,
			goMetric(tb, hub.AdminAddr, "go_goroutines"), mib(goMetric(tb, hub.AdminAddr, "go_memstats_heap_inuse_bytes")),
			mib(goMetric(tb, hub.AdminAddr, "go_gc_heap_live_bytes")), mib(goMetric(tb, hub.AdminAddr, "go_memstats_stack_inuse_bytes")))
	}
	time.Sleep(time.Until(opened.Add(settle - window)))
	res.CPU = cpuOver(tb, hub.Pid(), window)
	res.RSS = procRSS(tb, hub.Pid())
	res.Heartbeat = int(set.beats.Load())
	res.Goroutines, res.HeapInuse, res.HeapLive, res.StackInuse = goMetric(tb, hub.AdminAddr, "go_goroutines"),
		goMetric(tb, hub.AdminAddr, "go_memstats_heap_inuse_bytes"), goMetric(tb, hub.AdminAddr, "go_gc_heap_live_bytes"),
		goMetric(tb, hub.AdminAddr, "go_memstats_stack_inuse_bytes")
	if *flagProfile != "" { // where an idle link's memory goes: the heap in use and the goroutines' stacks
		p := &hubProfiler{tb: tb, base: "http://" + hub.AdminAddr + "/debug/pprof/", dir: *flagProfile, name: fmt.Sprintf("idle-%d", n)}
		if err := os.MkdirAll(p.dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		p.save("heap", "heap", 0)
		p.save("goroutine", "goroutine", 0)
		fmt.Printf("ironlink hub profiles: %s/%s-{heap,goroutine}.pb.gz\n", p.dir, p.name)
	}
	if f := set.failed.Load(); f > 0 {
		tb.Fatalf("%d idle links ended while idle", f)
	}
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM sites WHERE link_replica = 'idle'`).Scan(&res.LinkedInDB); err != nil {
		tb.Fatal(err)
	}
	if res.LinkedInDB != n {
		tb.Fatalf("the database shows %d sites linked to the replica, want %d", res.LinkedInDB, n)
	}
	return res
}

// BenchmarkIdleLinks opens -bench.idle-links idle links (default 10,000,
// each its own TCP connection) to one ironlink-hub process and reports its
// RSS and CPU against the same process with no link (target, issue 26
// item 3: at most 450 MiB at 10,000 links after 5 minutes).
// It takes the same time however large b.N is.
func BenchmarkIdleLinks(b *testing.B) {
	n, settle := *flagIdleLinks, *flagIdleSettle
	rawBase, rawRSS := runIdleRaw(b, n, settle)
	rawPer := float64(rawRSS-rawBase) / float64(n) / 1024
	fmt.Printf("ironlink raw ceiling (idle links, raw gRPC server): links=%d RSS=%.1f MiB (no links: %.1f MiB; per link %.1f KiB)\n",
		n, mib(rawRSS), mib(rawBase), rawPer)
	res := runIdle(b, n, settle)
	per := float64(res.RSS-res.BaseRSS) / float64(res.Links) / 1024
	b.ReportMetric(mib(res.RSS), "hub-rss-MiB")
	b.ReportMetric(per, "KiB/link")
	b.ReportMetric(rawPer, "raw-KiB/link")
	b.ReportMetric(100*res.CPU, "hub-cpu-%")
	b.Logf("%s", res)
	fmt.Println("ironlink idle links benchmark:", res)
	ratioLine(fmt.Sprintf("idle-%d-%s", n, shortDuration(settle)), rawPer/per)
}

// idleSamples parses -bench.idle-sample: ascending times, each shorter
// than settle.
func idleSamples(tb testing.TB, settle time.Duration) []time.Duration {
	var out []time.Duration
	for _, f := range strings.Split(*flagIdleSample, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d <= 0 || d >= settle || (len(out) > 0 && d <= out[len(out)-1]) {
			tb.Fatalf("-bench.idle-sample %q: want ascending durations shorter than -bench.idle-settle %s", f, settle)
		}
		out = append(out, d)
	}
	return out
}

// shortDuration writes d as 20s, 5m or 1m30s (no trailing zero units).
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// TestIdleLinksSmoke keeps the idle-links benchmark working: 500 idle links,
// each its own connection, all welcomed, all shown linked in the database,
// none dropped while idle; the hub's RSS is logged.
func TestIdleLinksSmoke(t *testing.T) {
	res := runIdle(t, 500, 4*time.Second)
	t.Log(res)
	if res.RSS <= 0 {
		t.Fatalf("no RSS read: %s", res)
	}
}

// goMetric reads one unlabelled gauge from the hub's /metrics at admin.
// A scrape that fails (a hub at its GOMEMLIMIT may not answer within its
// admin server's 30 s write timeout) is printed and read as -1: the RSS
// figures do not depend on it.
func goMetric(tb testing.TB, admin, name string) int64 {
	resp, err := http.Get("http://" + admin + "/metrics")
	var b []byte
	if err == nil {
		b, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err != nil {
		fmt.Printf("ironlink idle links: hub /metrics for %s unanswered: %v\n", name, err)
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				tb.Fatal(err)
			}
			return int64(f)
		}
	}
	tb.Fatalf("no %s in the hub's /metrics", name)
	return 0
}

package agent_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/placement/v1/resourceproviders"
	"github.com/gophercloud/gophercloud/v2/pagination"

	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/testlog"
	"github.com/ironlink/ironlink/satellite/agent"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/link"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/placement"
)

// The scale benchmark runs the simulated site in a child process (this
// test binary, re-executed with envScaleNodes set), so that getrusage and
// the RSS of this process measure the satellite alone, not the simulator
// serving it.
const (
	envScaleNodes      = "IRONLINK_SCALE_SIM_NODES"      // child: serve a site of this many nodes
	envScaleStandalone = "IRONLINK_SCALE_SIM_STANDALONE" // child: "1" for a standalone Ironic (no Placement)
	envScaleClouds     = "IRONLINK_SCALE_SIM_CLOUDS"     // child: where to write clouds.yaml
	// envScaleHeapProfile, when set, is where BenchmarkPollScale writes a
	// heap profile of the agent's steady state (go tool pprof -sample_index=inuse_space).
	envScaleHeapProfile = "IRONLINK_SCALE_HEAP_PROFILE"
)

func TestMain(m *testing.M) {
	if n := os.Getenv(envScaleNodes); n != "" {
		if err := serveScaleSite(n); err != nil {
			fmt.Fprintln(os.Stderr, "scale site:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveScaleSite is the child: a site of n nodes shaped like a GPU fleet
// (half running a customer instance, 1 in 20 in maintenance with an Ironic
// fault, 1 in 20 with a failed deploy and its last_error, every node and
// provider carrying the gate trait), Ironic's max_limit 1000. It prints
// READY once serving and stops when stdin closes.
func serveScaleSite(arg string) error {
	n, err := strconv.Atoi(arg)
	if err != nil {
		return err
	}
	standalone := os.Getenv(envScaleStandalone) == "1"
	c := openstacksim.New(openstacksim.Options{IronicMaxLimit: 1000, NoPlacement: standalone, NoNova: true})
	c.DefineTrait(agent.ReadyTrait)
	for i := range n {
		node := openstacksim.Node{Name: fmt.Sprintf("gpu-%05d", i), ProvisionState: "available", PowerState: "power on",
			ResourceClass: "gpu-h100", ConductorGroup: "rack-" + strconv.Itoa(i/40), Traits: []string{agent.ReadyTrait}}
		switch {
		case i%20 == 3:
			node.Maintenance, node.Fault, node.MaintenanceReason = true, "power failure", "BMC did not answer 3 power state syncs"
		case i%20 == 7:
			node.ProvisionState, node.LastError = "deploy failed", "Timeout reached while waiting for callback for node "+strconv.Itoa(i)
		case i%2 == 0:
			node.ProvisionState, node.InstanceUUID, node.Lessee = "active", fmt.Sprintf("5ca1ab1e-0000-4000-8000-%012d", i), "customer-a"
		}
		node = c.AddNode(node)
		if !standalone {
			c.AddProvider(node.UUID, node.UUID, []string{agent.ReadyTrait})
		}
	}
	if err := c.Start("127.0.0.1:0"); err != nil {
		return err
	}
	defer c.Close()
	if err := c.WriteCloudsYAML(os.Getenv(envScaleClouds), "sim"); err != nil {
		return err
	}
	fmt.Println("READY")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// startScaleSite starts the child serving n nodes and connects to it.
func startScaleSite(tb testing.TB, n int, standalone bool) *openstack.Clients {
	tb.Helper()
	clouds := filepath.Join(tb.TempDir(), "clouds.yaml")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envScaleNodes+"="+strconv.Itoa(n), envScaleClouds+"="+clouds)
	if standalone {
		cmd.Env = append(cmd.Env, envScaleStandalone+"=1")
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "READY" {
		tb.Fatalf("scale site did not start: %q %v", line, err)
	}
	mode := openstack.PlacementAuto
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := openstack.Connect(ctx, openstack.Config{CloudsYAML: clouds, Cloud: "sim", Placement: mode}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// scaleAgent is an agent over the site as in production (gophercloud
// clients, default page size and retries), without Nova.
func scaleAgent(c *openstack.Clients) (*agent.Agent, *link.Outbox) {
	cl := agent.Clients{Ironic: ironic.New(c.Baremetal, nil)}
	if c.Placement != nil {
		cl.Placement = placement.New(c.Placement, nil)
	}
	out := link.NewOutbox()
	out.MaxBatches = 1 << 20
	// No hardware reads: this measures the listing (the reads, once per
	// node, are BenchmarkHardwareUnchangedPoll's).
	cfg := agent.Config{PollInterval: time.Hour, HardwareReadsPerPoll: -1}
	cfg.Conditions.Standalone = c.Placement == nil
	return agent.New(cfg, cl, out, nil, testlog.Discard()), out
}

// rawListing is the raw reference: a plain gophercloud nodes.List over all
// pages with the same fields and page size as the satellite's listing
// (and, where the site has Placement, the same two provider listings
// resourceproviders.List makes), decoded into gophercloud's structs. It
// returns the node count.
func rawListing(ctx context.Context, tb testing.TB, c *openstack.Clients) int {
	// The simulator is Ironic 21.4, which answers 500 for allocation_uuid
	// in a list's fields; the satellite's client drops it after the first
	// poll's 500 (see ironic.Client), so both ask for the same fields.
	fields := listFields(tb, c)
	count := 0
	err := nodes.List(c.Baremetal, nodes.ListOpts{Fields: fields, Limit: ironic.DefaultPageLimit}).EachPage(ctx, func(_ context.Context, p pagination.Page) (bool, error) {
		ns, err := nodes.ExtractNodes(p)
		count += len(ns)
		return true, err
	})
	if err != nil {
		tb.Fatal(err)
	}
	if c.Placement != nil {
		for _, opts := range []resourceproviders.ListOpts{{}, {Required: agent.ReadyTrait}} {
			err := resourceproviders.List(c.Placement, opts).EachPage(ctx, func(_ context.Context, p pagination.Page) (bool, error) {
				_, err := resourceproviders.ExtractResourceProviders(p)
				return true, err
			})
			if err != nil {
				tb.Fatal(err)
			}
		}
	}
	return count
}

// listFields are the node fields both listings ask for.
func listFields(tb testing.TB, c *openstack.Clients) []string {
	v, err := openstack.ParseMicroversion(c.Baremetal.Microversion)
	if err != nil {
		tb.Fatal(err)
	}
	all, _ := ironic.Fields(v)
	var fields []string
	for _, f := range all {
		if f != "allocation_uuid" {
			fields = append(fields, f)
		}
	}
	return fields
}

// floorListing is the floor under any listing: the same page requests
// (same fields, limit and markers; the two provider listings where the
// site has Placement) through gophercloud's client, each body decoded
// only as far as the node uuids that give the next marker. The satellite
// cannot do less and still know every node. It returns the node count.
func floorListing(ctx context.Context, tb testing.TB, c *openstack.Clients, fields []string) int {
	count, marker := 0, ""
	for {
		q := url.Values{"fields": {strings.Join(fields, ",")}, "limit": {strconv.Itoa(ironic.DefaultPageLimit)}}
		if marker != "" {
			q.Set("marker", marker)
		}
		var page struct {
			Nodes []struct {
				UUID string `json:"uuid"`
			} `json:"nodes"`
		}
		if _, err := c.Baremetal.Get(ctx, c.Baremetal.ServiceURL("nodes")+"?"+q.Encode(), &page, nil); err != nil {
			tb.Fatal(err)
		}
		count += len(page.Nodes)
		if len(page.Nodes) < ironic.DefaultPageLimit {
			break
		}
		marker = page.Nodes[len(page.Nodes)-1].UUID
	}
	if c.Placement != nil {
		for _, q := range []string{"", "?required=" + agent.ReadyTrait} {
			var rps struct {
				ResourceProviders []struct {
					UUID string `json:"uuid"`
				} `json:"resource_providers"`
			}
			if _, err := c.Placement.Get(ctx, c.Placement.ServiceURL("resource_providers")+q, &rps, nil); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return count
}

// cpuTime is the process's user+system CPU time so far (getrusage).
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procStatusMiB reads a "VmRSS"/"VmHWM" line of /proc/self/status in MiB
// (-1 where unavailable).
func procStatusMiB(key string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, key+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return -1
}

// BenchmarkPollScale: the satellite polling a simulated 10,000-node site
// (issue 11 item 6; target: poll CPU within 5 % of the raw listing, RSS
// < 100 MiB). Each iteration first makes the raw listing (rawListing: the
// same pages decoded by plain gophercloud), then the floor listing
// (floorListing: the same requests, only the uuids decoded), then the
// satellite's full poll
// (listing into ironic.Node, the Placement gate, the seven conditions of
// every node, the comparison with the last poll, the deltas); both are
// timed by wall clock and by getrusage CPU of this process (the simulator
// runs in a child process). It reports both, their ratios, the RSS and
// its peak, and the live heap after a GC (the agent's state for 10,000
// devices). The first poll (every device new) is made before the timer.
func BenchmarkPollScale(b *testing.B) {
	for _, tc := range []struct {
		name       string
		standalone bool
	}{{"placement", false}, {"standalone", true}} {
		b.Run(fmt.Sprintf("site=%s/nodes=10000", tc.name), func(b *testing.B) {
			const n = 10000
			c := startScaleSite(b, n, tc.standalone)
			a, out := scaleAgent(c)
			ctx := context.Background()
			t0 := time.Now()
			if err := a.Poll(ctx); err != nil {
				b.Fatal(err)
			}
			first := time.Since(t0)
			if snap, ok := a.Snapshot(); !ok || len(snap) != n {
				b.Fatalf("first poll: %d devices, want %d", len(snap), n)
			}
			drain(out, a)
			fields := listFields(b, c)
			var rawCPU, floorCPU, pollCPU, rawWall, floorWall, pollWall time.Duration
			pollPeak := 0.0
			b.ResetTimer()
			for range b.N {
				c0, w0 := cpuTime(b), time.Now()
				if got := rawListing(ctx, b, c); got != n {
					b.Fatalf("raw listing: %d nodes", got)
				}
				c1, w1 := cpuTime(b), time.Now()
				if got := floorListing(ctx, b, c, fields); got != n {
					b.Fatalf("floor listing: %d nodes", got)
				}
				c2, w2 := cpuTime(b), time.Now()
				// The poll's own peak RSS: the references' garbage
				// returned to the OS, the peak reset (clear_refs 5).
				b.StopTimer()
				debug.FreeOSMemory()
				resetPeakRSS()
				b.StartTimer()
				c3, w3 := cpuTime(b), time.Now()
				if err := a.Poll(ctx); err != nil {
					b.Fatal(err)
				}
				c4, w4 := cpuTime(b), time.Now()
				pollPeak = max(pollPeak, procStatusMiB("VmHWM"))
				rawCPU, floorCPU, pollCPU = rawCPU+c1-c0, floorCPU+c2-c1, pollCPU+c4-c3
				rawWall, floorWall, pollWall = rawWall+w1.Sub(w0), floorWall+w2.Sub(w1), pollWall+w4.Sub(w3)
			}
			b.StopTimer()
			if st := a.Stats(); st.LastPollNodes != n {
				b.Fatalf("poll saw %d nodes", st.LastPollNodes)
			}
			drain(out, a)
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if p := os.Getenv(envScaleHeapProfile); p != "" {
				f, _ := os.Create(p)
				_ = pprof.WriteHeapProfile(f)
				f.Close()
			}
			runtime.KeepAlive(a) // its state for n devices is what the live heap measures
			rss := procStatusMiB("VmRSS")
			per := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(b.N) }
			ratio := func(x, y time.Duration) float64 { return float64(x) / float64(y) }
			b.ReportMetric(per(rawCPU), "raw-cpu-ms/op")
			b.ReportMetric(per(floorCPU), "floor-cpu-ms/op")
			b.ReportMetric(per(pollCPU), "poll-cpu-ms/op")
			b.ReportMetric(ratio(pollCPU, rawCPU), "cpu-ratio")
			b.ReportMetric(ratio(pollCPU, floorCPU), "cpu-ratio-floor")
			b.ReportMetric(ratio(pollWall, rawWall), "wall-ratio")
			b.ReportMetric(pollPeak, "poll-peak-rss-MiB")
			b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "live-heap-MiB")
			// scripts/bench.sh's line: the floor listing's CPU over the poll's.
			fmt.Printf("ironlink ratio: poll-%s-%d %.3f\n", tc.name, n, ratio(floorCPU, pollCPU))
			b.Logf("%s, %d nodes, %d iterations: gophercloud listing CPU %.1f ms wall %.1f ms; floor listing CPU %.1f ms wall %.1f ms; "+
				"poll CPU %.1f ms = %.1f%% of gophercloud, %.1f%% of floor; wall %.1f ms = %.1f%% / %.1f%%; first poll %s; "+
				"poll peak RSS %.1f MiB, RSS after %.1f MiB, live heap %.1f MiB",
				tc.name, n, b.N, per(rawCPU), per(rawWall), per(floorCPU), per(floorWall),
				per(pollCPU), 100*ratio(pollCPU, rawCPU), 100*ratio(pollCPU, floorCPU),
				per(pollWall), 100*ratio(pollWall, rawWall), 100*ratio(pollWall, floorWall),
				first.Round(time.Millisecond), pollPeak, rss, float64(ms.HeapInuse)/(1<<20))
		})
	}
}

// drain takes what the agent pushed and acknowledges it, as the link does
// once the hub committed it (an unacknowledged batch is kept for resending).
func drain(out *link.Outbox, a *agent.Agent) {
	for _, bt := range out.Take(a.Snapshot) {
		out.Ack(bt.GetSequence())
	}
}

// resetPeakRSS resets this process's VmHWM to its current RSS (Linux
// clear_refs "5"); a no-op where that is unavailable.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// The scale benchmark's setup, small, for make test: the child site
// serves, the raw listing and the satellite's poll see the same nodes, the
// first poll knows every device and an unchanged site's poll pushes
// nothing.
func TestPollScaleSmoke(t *testing.T) {
	const n = 1500 // two pages
	for _, standalone := range []bool{false, true} {
		c := startScaleSite(t, n, standalone)
		if (c.Placement == nil) != standalone {
			t.Fatalf("standalone=%v: Placement client %v", standalone, c.Placement)
		}
		a, out := scaleAgent(c)
		ctx := context.Background()
		if got := rawListing(ctx, t, c); got != n {
			t.Fatalf("raw listing: %d nodes, want %d", got, n)
		}
		if got := floorListing(ctx, t, c, listFields(t, c)); got != n {
			t.Fatalf("floor listing: %d nodes, want %d", got, n)
		}
		if err := a.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		snap, ok := a.Snapshot()
		if !ok || len(snap) != n {
			t.Fatalf("standalone=%v: snapshot of %d devices, want %d", standalone, len(snap), n)
		}
		out.Take(a.Snapshot)
		if err := a.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		for _, bt := range out.Take(a.Snapshot) {
			if len(bt.GetDevices()) > 0 {
				t.Fatalf("standalone=%v: unchanged site pushed %d updates", standalone, len(bt.GetDevices()))
			}
		}
	}
}

package hostile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/grpcraw"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

var (
	buildOnce sync.Once
	bins      harness.Binaries
	buildErr  error
)

// binaries builds the hub and satellite once for this package's tests that
// need a real process.
func binaries(t *testing.T) harness.Binaries {
	t.Helper()
	buildOnce.Do(func() { bins, buildErr = harness.Build() })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bins
}

// rssKiB reads a process's resident set size (VmRSS) or its peak (VmHWM)
// in KiB (harness.ProcStatusKiB); an error fails the test.
func rssKiB(t *testing.T, pid int, field string) int {
	t.Helper()
	n, err := harness.ProcStatusKiB(pid, field)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// floodHub starts a real hub with authentication on (one operator,
// ops-flood, in its roster) and returns it with a function that makes a
// fresh valid bearer token for that operator.
func floodHub(t *testing.T) (*harness.Hub, func() string) {
	t.Helper()
	const audience = "https://hub.flood.test"
	key, err := auth.GenerateKey(auth.AlgES256)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := auth.FormatRosterEntry("ops-flood", "", []string{auth.ScopeOperationsRead}, "k1", key.Public())
	if err != nil {
		t.Fatal(err)
	}
	roster := filepath.Join(t.TempDir(), "roster.yaml")
	if err := os.WriteFile(roster, []byte("satellites:\noperators:\n"+entry), 0o600); err != nil {
		t.Fatal(err)
	}
	h := harness.StartHub(t, binaries(t), pgtest.NewDatabase(t), "flood", "--no-auth=false", "--roster", roster, "--audience", audience)
	return h, func() string {
		tok, err := auth.Sign(key, "k1", "ops-flood", audience, time.Minute, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
}

// TestFloodWithoutTokenKeepsMemoryFlat is the outside probe of issue 27,
// scaled to run in seconds: 64 concurrent ListSites calls of 15 MiB each
// over 8 connections, round after round for 8 s, half without a token and
// half with a well-formed token signed by a key the roster does not hold.
// All are refused Unauthenticated (or find their connection closed after
// too many refusals) before their body is read: the hub's peak resident
// memory (the kernel's VmHWM, reset to the idle figure before the probe)
// stays under twice its idle figure, and a valid operator's calls keep
// succeeding throughout. The figures are printed.
func TestFloodWithoutTokenKeepsMemoryFlat(t *testing.T) {
	h, valid := floodHub(t)
	pid := h.Pid()
	time.Sleep(time.Second) // let the start-up garbage settle before the idle figure
	idle := rssKiB(t, pid, "VmRSS")
	// The kernel's high-water mark (VmHWM) is what a memory limit meets:
	// no sampling misses it. Start it at the idle figure (clear_refs 5), so
	// that it measures the flood, not the start-up; where that cannot be
	// done it includes the start-up, which only makes the bound stricter.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Logf("reset the hub's VmHWM: %v (it includes the start-up)", err)
	}
	idleHWM := rssKiB(t, pid, "VmHWM")

	stranger, err := auth.GenerateKey(auth.AlgES256)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := auth.Sign(stranger, "k1", "ops-flood", "https://hub.flood.test", time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	payload := harness.OversizedListSites(15 << 20)
	const conns, perConn, probeFor = 8, 8, 8 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), probeFor)
	defer cancel()

	var peak atomic.Int64
	sampled := make(chan struct{})
	go func() { // sample the hub's RSS every 20 ms while the probe runs
		defer close(sampled)
		for ctx.Err() == nil {
			if v := int64(rssKiB(t, pid, "VmRSS")); v > peak.Load() {
				peak.Store(v)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	var sent, refused atomic.Int64
	codesSeen := sync.Map{}
	var wg sync.WaitGroup
	for c := range conns {
		cc, err := grpc.NewClient(h.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.ForceCodecV2(grpcraw.Codec{})))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		for i := range perConn {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					cctx := ctx
					if (c+i)%2 == 1 {
						cctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+forged)
					}
					req := payload
					err := cc.Invoke(cctx, "/ironlink.v1.FleetService/ListSites", &req, &ironlinkv1.ListSitesResponse{})
					code := status.Code(err)
					if dl, _ := ctx.Deadline(); ctx.Err() != nil || code == codes.DeadlineExceeded && time.Until(dl) < time.Second {
						return // the probe's end (the server may see the deadline a moment first)
					}
					sent.Add(1)
					codesSeen.Store(code, true)
					switch code {
					case codes.Unauthenticated, codes.Unavailable: // refused, or the connection closed for it
						refused.Add(1)
					default:
						t.Errorf("flood call: %v, want Unauthenticated", err)
						return
					}
				}
			}()
		}
	}

	// A valid operator works throughout.
	fleet := harness.Fleet(t, h.Addr)
	var ok, failed int
	for ctx.Err() == nil {
		cctx, ccancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", valid()), 5*time.Second)
		start := time.Now()
		_, err := fleet.ListSites(cctx, &ironlinkv1.ListSitesRequest{})
		ccancel()
		if err != nil {
			failed++
			t.Errorf("valid operator during the flood: %v (after %s)", err, time.Since(start))
		} else {
			ok++
		}
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	<-sampled
	time.Sleep(time.Second) // past the flood calls' deadline on the hub too (their timers' moment)
	hwm := rssKiB(t, pid, "VmHWM")
	var seen []string
	codesSeen.Range(func(k, _ any) bool { seen = append(seen, k.(codes.Code).String()); return true })
	t.Logf("flood: %d calls of 15 MiB over %d connections (%d at once) in %s, %d refused %v; valid operator: %d ok, %d failed",
		sent.Load(), conns, conns*perConn, probeFor, refused.Load(), seen, ok, failed)
	t.Logf("hub RSS: idle %d MiB (VmHWM %d MiB at the start), sampled peak during the flood %d MiB (%.2f× idle), VmHWM after it %d MiB (%.2f× idle)",
		idle>>10, idleHWM>>10, peak.Load()>>10, float64(peak.Load())/float64(idle), hwm>>10, float64(hwm)/float64(idle))
	if sent.Load() < int64(conns*perConn) {
		t.Fatalf("only %d flood calls completed: the probe did not run", sent.Load())
	}
	if ok == 0 {
		t.Fatal("no valid call succeeded during the flood")
	}
	// Issue 27 asks for under 2× idle, of the peak: the kernel's
	// high-water mark, which also catches what lasts less than a sample.
	// Measured (docs/reference/access.md): before the gate ended refused
	// streams' contexts, VmHWM 2.8-3.1× idle on a loaded machine (all
	// refused calls' deadline timers firing at the probe's end: 14,307
	// goroutines at once); after, 1.3×.
	if hwm >= 2*idle {
		t.Fatalf("hub VmHWM %d KiB after the flood, idle RSS %d KiB: want under 2× idle", hwm, idle)
	}
	if !strings.Contains(h.Output(), "too many unauthenticated requests in a row") {
		t.Errorf("no connection was closed for its refusals; hub log:\n%s", harness.Tail(h.Output(), 20))
	}
}

// TestRequestSizeLimitsPerService: an authenticated operator's ListSites of
// 5 MiB is refused ResourceExhausted (MESSAGE_TOO_LARGE, the operator
// services accept 4 MiB by default) although the link accepts 16 MiB.
func TestRequestSizeLimitsPerService(t *testing.T) {
	h, valid := floodHub(t)
	cc, err := grpc.NewClient(h.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.ForceCodecV2(grpcraw.Codec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	call := func(n int) error {
		req := harness.OversizedListSites(n)
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", valid())
		return cc.Invoke(ctx, "/ironlink.v1.FleetService/ListSites", &req, &ironlinkv1.ListSitesResponse{})
	}
	if err := call(1 << 20); err != nil {
		t.Fatalf("1 MiB ListSites: %v", err)
	}
	err = call(5 << 20)
	if status.Code(err) != codes.ResourceExhausted || grpcerr.Reason(err) != grpcerr.ReasonMessageTooLarge || !strings.Contains(err.Error(), "at most 4194304") {
		t.Fatalf("5 MiB ListSites: %v, want ResourceExhausted %s naming the limit", err, grpcerr.ReasonMessageTooLarge)
	}
}

package faults

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

// Slow consumer scenario: slowWatchers WatchFleet streams each take one
// message every slowRead while 10 scripted sites churn for slowPhase.
const (
	slowWatchers = 5
	slowRead     = 100 * time.Millisecond
	slowPhase    = 10 * time.Second
)

// TestSlowWatchFleetConsumer: five WatchFleet consumers that read one
// message every 100 ms while ten scripted sites churn (far more events than
// they take) keep the hub's memory bounded — its peak RSS with them under
// 2× its peak under the same churn without them (the hub reads the feed
// from PostgreSQL a page at a time, as the stream's flow control lets it
// send) — and one of them, cut and resumed from the last cursor it
// received, gets exactly the events a fast consumer from the same start
// got after that cursor: no gap, no repeat. The figures are printed.
func TestSlowWatchFleetConsumer(t *testing.T) { repeat(t, scenarioSlowWatch) }

func scenarioSlowWatch(t *testing.T) {
	db, pool := newDatabase(t)
	hub := startHub(t, db, "hub-a", "--log-level", "info")
	fc := harness.Fleet(t, hub.Addr)
	sats := make([]*satsim.Sat, 10)
	for i := range sats {
		sats[i] = satsim.New(satsim.Config{Site: fmt.Sprintf("slowfeed-%02d", i), Addr: hub.Addr, Devices: 200, DevicesPerBatch: 50, Window: 4})
	}
	runSats(t, sats...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	head, err := fc.WatchFleet(ctx, &ironlinkv1.WatchFleetRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := head.Recv()
	if err != nil {
		t.Fatal(err)
	}
	start := first.GetCursor() // every event after it is the churn's

	for _, s := range sats {
		s.Produce(true)
	}
	flowing(t, pool, nil, sats...)
	alone := peakRSS(t, hub.Pid(), slowPhase/2)

	var slow []*slowWatcher
	for range slowWatchers {
		slow = append(slow, watchSlowly(ctx, t, fc, start))
	}
	with := peakRSS(t, hub.Pid(), slowPhase)
	for _, s := range sats {
		s.Produce(false)
	}
	t.Logf("hub peak RSS under churn: %d MiB without watchers, %d MiB with %d watchers reading one message per %s (%.2f×); they read %d events each",
		alone>>10, with>>10, slowWatchers, slowRead, float64(with)/float64(alone), slow[0].read())
	if with >= 2*alone {
		t.Errorf("hub peak RSS %d KiB with slow watchers, %d KiB without: want under 2×", with, alone)
	}

	// Cut the first slow watcher and resume it, fast, from its last cursor.
	cut := slow[0]
	cut.cancel()
	<-cut.done
	got := cut.keys()
	resumed := follow(ctx, t, fc, cut.lastCursor())
	ref := follow(ctx, t, fc, start)
	harness.Eventually(t, 60*time.Second, func() error {
		r, rl := ref.snapshot()
		m, ml := resumed.snapshot()
		if len(r) == 0 || time.Since(rl) < 3*time.Second || time.Since(ml) < 3*time.Second {
			return errorf("resumed watcher has %d+%d events, the fast one %d: still reading", len(got), len(m), len(r))
		}
		return nil
	})
	m, _ := resumed.snapshot()
	r, _ := ref.snapshot()
	for _, e := range m {
		got = append(got, feedKey(e))
	}
	var want []string
	for _, e := range r {
		want = append(want, feedKey(e))
	}
	t.Logf("slow watcher: %d events before the cut, %d after resuming; the fast watcher %d", len(cut.keys()), len(m), len(r))
	if !slices.Equal(got, want[:min(len(got), len(want))]) || len(got) != len(want) {
		t.Errorf("the resumed feed differs from an unbroken one: %d events against %d; first difference at %d", len(got), len(want), firstDifference(got, want))
	}
}

// slowWatcher is a WatchFleet stream read one message every slowRead.
type slowWatcher struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	events []string
	cursor string
	n      atomic.Int64
}

func watchSlowly(ctx context.Context, t *testing.T, fc ironlinkv1.FleetServiceClient, cursor string) *slowWatcher {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	s, err := fc.WatchFleet(ctx, &ironlinkv1.WatchFleetRequest{Cursor: cursor})
	if err != nil {
		t.Fatal(err)
	}
	w := &slowWatcher{cancel: cancel, done: make(chan struct{}), cursor: cursor}
	go func() {
		defer close(w.done)
		for {
			m, err := s.Recv()
			if err != nil || ctx.Err() != nil { // cut: what gRPC still holds is not read
				return
			}
			w.mu.Lock()
			if m.GetEvent() != nil {
				w.events = append(w.events, feedKey(m))
				w.n.Add(1)
			}
			w.cursor = m.GetCursor()
			w.mu.Unlock()
			time.Sleep(slowRead)
		}
	}()
	return w
}

func (w *slowWatcher) read() int64 { return w.n.Load() }

func (w *slowWatcher) keys() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events)
}

func (w *slowWatcher) lastCursor() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cursor
}

// peakRSS samples pid's resident set size every 50 ms for d and returns
// the largest, in KiB.
func peakRSS(t *testing.T, pid int, d time.Duration) int {
	t.Helper()
	peak := 0
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
				if err != nil {
					t.Fatal(err)
				}
				peak = max(peak, n)
			}
		}
	}
	return peak
}

// firstDifference is the first index at which a and b differ.
func firstDifference(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestStalledWatchIsToldItFellBehind: a WatchFleet consumer that stops
// reading while ten scripted sites churn, against a hub with
// --watch-send-timeout 2s, is told it fell behind: after the messages the
// hub had queued its stream ends with ResourceExhausted WATCH_FELL_BEHIND,
// whose "cursor" is the last cursor it received, and the hub logs the end
// once. Resumed from that cursor it gets exactly what an unbroken
// consumer from the same start got: no gap, no repeat, its first changes
// marked behind (WatchFleetResponse.behind) by at least 5 s. The client's
// window is fixed at 64 KiB (no BDP growth) so the stall fills it.
func TestStalledWatchIsToldItFellBehind(t *testing.T) { repeat(t, scenarioStalledWatch) }

func scenarioStalledWatch(t *testing.T) {
	db, pool := newDatabase(t)
	hub := startHub(t, db, "hub-a", "--log-level", "info", "--watch-send-timeout", "2s")
	fc := harness.Fleet(t, hub.Addr)
	cc, err := grpc.NewClient(hub.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithInitialWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	stalled := ironlinkv1.NewFleetServiceClient(cc)
	sats := make([]*satsim.Sat, 10)
	for i := range sats {
		sats[i] = satsim.New(satsim.Config{Site: fmt.Sprintf("stallfeed-%02d", i), Addr: hub.Addr, Devices: 200, DevicesPerBatch: 50, Window: 4})
	}
	runSats(t, sats...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hctx, hcancel := context.WithCancel(ctx)
	head, err := fc.WatchFleet(hctx, &ironlinkv1.WatchFleetRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := head.Recv()
	hcancel() // only its starting cursor is wanted: not read further, it would fall behind too
	if err != nil {
		t.Fatal(err)
	}
	start := first.GetCursor()
	st, err := stalled.WatchFleet(ctx, &ironlinkv1.WatchFleetRequest{Cursor: start})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	for _, s := range sats {
		s.Produce(true)
	}
	flowing(t, pool, nil, sats...)
	time.Sleep(8 * time.Second) // not reading: the window fills, the hub's send waits past 2 s
	stalledFor := time.Now()
	var got []string
	last := start
	for {
		m, err := st.Recv()
		if err != nil {
			t.Logf("the stalled watch read %d events after its stall, then: %v (%s after it read again)", len(got), err, time.Since(stalledFor).Round(time.Millisecond))
			if status.Code(err) != codes.ResourceExhausted || grpcerr.Reason(err) != grpcerr.ReasonWatchFellBehind {
				t.Fatalf("the stalled watch ended with %v, want ResourceExhausted %s", err, grpcerr.ReasonWatchFellBehind)
			}
			if c := behindCursor(err); c != last {
				t.Errorf("WATCH_FELL_BEHIND names cursor %q; the last message received had %q", c, last)
			}
			if !strings.Contains(status.Convert(err).Message(), last) {
				t.Errorf("the message %q does not name the cursor %s", status.Convert(err).Message(), last)
			}
			break
		}
		if m.GetEvent() != nil {
			got = append(got, feedKey(m))
		}
		last = m.GetCursor()
	}
	if len(got) == 0 {
		t.Fatal("the stalled watch got no event before it was ended")
	}
	resumed := follow(ctx, t, fc, last)
	ref := follow(ctx, t, fc, start)
	for _, s := range sats {
		s.Produce(false)
	}
	harness.Eventually(t, 60*time.Second, func() error {
		r, rl := ref.snapshot()
		m, ml := resumed.snapshot()
		if len(r) == 0 || time.Since(rl) < 3*time.Second || time.Since(ml) < 3*time.Second {
			return errorf("resumed watcher has %d+%d events, the unbroken one %d: still reading", len(got), len(m), len(r))
		}
		return nil
	})
	m, _ := resumed.snapshot()
	r, _ := ref.snapshot()
	before := len(got)
	for _, e := range m {
		got = append(got, feedKey(e))
	}
	var want []string
	for _, e := range r {
		want = append(want, feedKey(e))
	}
	t.Logf("stalled watch: %d events before it was told it fell behind, %d after resuming; the unbroken watch %d", before, len(m), len(r))
	// Resumed behind a backlog, the first changes say how far behind.
	var lagging int
	var most time.Duration
	for _, e := range m {
		if b := e.GetBehind(); b != nil {
			lagging++
			most = max(most, b.AsDuration())
		}
	}
	t.Logf("resumed watch: %d of %d changes marked behind, by up to %s", lagging, len(m), most.Round(time.Millisecond))
	if most < 5*time.Second {
		t.Errorf("the resumed watch's changes are marked behind by at most %s, want at least 5 s (it resumed after an 8 s stall)", most)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the resumed feed differs from an unbroken one: %d events against %d; first difference at %d", len(got), len(want), firstDifference(got, want))
	}
	if n := hub.Count("watch fell behind; stream ended"); n != 1 {
		t.Errorf("the hub logged %d ends of a watch that fell behind, want 1", n)
	}
}

// behindCursor is the "cursor" of a WATCH_FELL_BEHIND status's ErrorInfo.
func behindCursor(err error) string {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei.GetMetadata()["cursor"]
		}
	}
	return ""
}

//go:build soak

package soak

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/admission"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/grpcraw"
	"github.com/ironlink/ironlink/test/harness"
)

// The fault kinds of this file (docs/howto/soak.md).
const (
	// faultFailover kills the PostgreSQL primary, promotes its synchronous
	// standby and rebuilds a standby on the dead primary's port.
	faultFailover = "PostgreSQL failover to the promoted standby"
	// faultOversized sends hub-a, from outside, ListSites requests larger
	// than the operator services accept. The soak's hubs run without
	// authentication, so each body is read before it is refused.
	faultOversized = "oversized-request flood (160 × 15 MiB ListSites over 8 connections)"
)

// failover is the failover fault: the primary of the soak's pair is killed
// (SIGKILL of every process), promoted 3 s later (no primary meanwhile, as
// while an operator decides), and a fresh synchronous standby is built on
// the dead primary's port (pgtest.Pair.Rebuild), so the hubs' and the
// checker's multi-host URL keeps working and the next failover finds a
// standby. Nothing acknowledged may be lost: each scripted site's
// last_sequence on the promoted cluster is at least what the site had
// acknowledged before the kill. The time from the kill to the first commit
// on the new primary (a scripted site's sequence moving) is recorded.
func (r *rig) failover() {
	t := r.t
	acked := make([]uint64, len(r.sats))
	names := make([]string, len(r.sats))
	for i, s := range r.sats {
		acked[i], names[i] = s.Stats().LastAcked, s.Site()
	}
	killed := time.Now()
	r.pair.Crash(t)
	time.Sleep(3 * time.Second)
	promoting := time.Now()
	r.pair.Promote(t)
	promoted := time.Now()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, r.pair.Standby.URL("ironlink")) // the promoted one, before Rebuild swaps the roles
	if err != nil {
		t.Errorf("%s: connect to the promoted standby: %v", faultFailover, err)
		r.pair.Rebuild(t)
		return
	}
	seqs := func() (map[string]int64, error) {
		rows, err := conn.Query(ctx, `SELECT name, last_sequence FROM sites WHERE name = ANY($1)`, names)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		m := map[string]int64{}
		for rows.Next() {
			var k string
			var v int64
			if err := rows.Scan(&k, &v); err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, rows.Err()
	}
	seq0, err := seqs()
	if err != nil {
		t.Errorf("%s: read the promoted standby: %v", faultFailover, err)
	}
	for i, n := range names {
		if seq0 != nil && uint64(seq0[n]) < acked[i] {
			r.chk.record(invHistoryOnce, 0, fmt.Sprintf("failover: the promoted standby has sequence %d of %s, %d were acknowledged before the kill", seq0[n], n, acked[i]))
		}
	}
	var first time.Time
	for first.IsZero() && ctx.Err() == nil {
		cur, err := seqs()
		for _, n := range names {
			if err == nil && cur[n] > seq0[n] {
				first = time.Now()
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	conn.Close(context.Background())
	if first.IsZero() {
		t.Errorf("%s: no scripted site's sequence moved on the promoted standby within 2 minutes of the promotion", faultFailover)
	}
	rebuilding := time.Now()
	r.pair.Rebuild(t)
	fig := fmt.Sprintf("kill → promote %s, promote → first commit %s, kill → first commit %s; standby rebuilt and synchronous in %s",
		promoting.Sub(killed).Round(time.Millisecond), first.Sub(promoted).Round(time.Millisecond),
		first.Sub(killed).Round(time.Millisecond), time.Since(rebuilding).Round(time.Millisecond))
	if first.IsZero() {
		fig = "no commit after the promotion"
	}
	t.Logf("failover: %s", fig)
	r.note(faultFailover, fig)
}

// floodConns and floodCalls shape the oversized-request flood: floodCalls
// calls in all, spread over floodConns connections, each connection
// sending its share one call after another.
const floodConns, floodCalls = 8, 160

// oversizedFlood sends hub-a floodCalls ListSites requests of 15 MiB
// (harness.OversizedListSites) over floodConns connections, and checks that every one is refused
// ResourceExhausted MESSAGE_TOO_LARGE (the operator services accept
// 4 MiB: --max-request-bytes) and that hub-a's peak resident memory during
// the flood (the kernel's VmHWM, reset to the current figure first) stays
// under floodBound. Violations fail the test.
//
// hub-a's /metrics samples of the memory invariant are not taken while the
// flood runs (sampleMu) nor before two forced collections after it: what
// the flood leaves only in sync.Pool-held buffers (gRPC's receive
// buffers: dropped by the second collection) is not a leak, what it leaks
// stays and shows in every later sample.
func (r *rig) oversizedFlood() {
	t := r.t
	r.sampleMu.Lock()
	defer r.sampleMu.Unlock()
	pid := r.hubA.Pid()
	before, err := harness.ProcStatusKiB(pid, "VmRSS")
	if err != nil {
		t.Errorf("%s: %v", faultOversized, err)
		return
	}
	// As test/hostile does: the high-water mark starts at the current
	// figure, so it measures the flood; where it cannot be reset it
	// includes the past, which only makes the bound stricter.
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
	payload := harness.OversizedListSites(15 << 20)
	var refused atomic.Int64
	var mu sync.Mutex
	var bad []string
	start := time.Now()
	var wg sync.WaitGroup
	for range floodConns {
		cc, err := grpc.NewClient(r.hubA.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(grpcraw.Codec{})))
		if err != nil {
			t.Errorf("%s: %v", faultOversized, err)
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cc.Close()
			for range floodCalls / floodConns {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				req := payload
				err := cc.Invoke(ctx, "/ironlink.v1.FleetService/ListSites", &req, &ironlinkv1.ListSitesResponse{})
				cancel()
				if status.Code(err) == codes.ResourceExhausted && grpcerr.Reason(err) == grpcerr.ReasonMessageTooLarge {
					refused.Add(1)
					continue
				}
				mu.Lock()
				bad = append(bad, fmt.Sprintf("%v", err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	peak, err := harness.ProcStatusKiB(pid, "VmHWM")
	if err != nil {
		t.Errorf("%s: %v", faultOversized, err)
	}
	fig := fmt.Sprintf("%d calls in %s, %d refused ResourceExhausted %s; hub-a RSS before %d MiB, peak (VmHWM) %d MiB (%.2f×; bound %d MiB)",
		floodCalls, took.Round(time.Millisecond), refused.Load(), grpcerr.ReasonMessageTooLarge, before>>10, peak>>10, float64(peak)/float64(before), floodBound(before)>>10)
	t.Logf("oversized flood: %s", fig)
	r.note(faultOversized, fig)
	for i, b := range bad {
		if i < 5 {
			t.Errorf("%s: a call ended %s, want ResourceExhausted %s", faultOversized, b, grpcerr.ReasonMessageTooLarge)
		}
	}
	if bound := floodBound(before); peak >= bound {
		t.Errorf("%s: hub-a's peak RSS %d KiB, %d KiB before the flood: want under %d KiB (2× before plus one %d-byte message a connection)",
			faultOversized, peak, before, bound, admission.DefaultMaxLinkMessageBytes)
	}
	for range 2 {
		_ = forceGC(context.Background(), r.hubA.AdminAddr)
	}
}

// floodBound is the peak resident memory (KiB) hub-a may reach during the
// oversized flood, from its resident memory before (KiB): twice that, plus
// one whole message of the server-wide receive limit (the link's,
// admission.DefaultMaxLinkMessageBytes) for each flood connection's call
// in flight. The soak's hubs run without authentication, and gRPC-Go has
// one receive limit for the whole server: a request from a caller the hub
// does not refuse at its headers (here every caller; with authentication,
// one with an authentic token) is read whole before its service's 4 MiB
// limit refuses it (hub/admission). Issue 27's bound, under 2× with
// nothing added, is for callers without a token, whose bodies are never
// read: test/hostile TestFloodWithoutTokenKeepsMemoryFlat. Measured on an
// idle hub: 31 MiB before, 160 MiB peak (5.15×) with this flood
// (docs/howto/soak.md).
func floodBound(beforeKiB int) int {
	return 2*beforeKiB + floodConns*admission.DefaultMaxLinkMessageBytes>>10
}

// note keeps a figure of one injection of a fault kind for the summary.
func (r *rig) note(kind, fig string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.figures[kind] = append(r.figures[kind], fig)
}

package faults

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/test/harness"
)

// linkTap records what real satellites send, for the exact history check
// the scripted satellites get (satsim.Sat.Verify): it is a LinkService in
// front of a hub (tap returns the address to give a satellite, or a load
// balancer, instead of the hub's) that forwards every message both ways
// unchanged and keeps each batch the hub committed, in the order the hub
// committed them: acknowledged, or (its ack lost with a cut link) at or
// below the sequence the hub's next Welcome says it has committed.
// Statuses the hub ends a link with reach the satellite as they are.
type linkTap struct {
	mu      sync.Mutex
	acked   map[string][]*ironlinkv1.ConditionBatch // site → batches committed, in order
	seen    map[string]bool                         // boot id/sequence: one entry per batch, resends left out
	pending map[string]sentBatch                    // boot id/sequence → batch sent, until committed
	boot    map[string]string                       // site → boot id of the satellite that sent last
	errors  []string
}

type sentBatch struct {
	site  string
	batch *ironlinkv1.ConditionBatch
}

func newLinkTap() *linkTap {
	return &linkTap{acked: map[string][]*ironlinkv1.ConditionBatch{}, seen: map[string]bool{}, pending: map[string]sentBatch{}, boot: map[string]string{}}
}

// tap serves a tap in front of hubAddr until the test ends and returns its address.
func (lt *linkTap) tap(t *testing.T, hubAddr string) string {
	t.Helper()
	cc, err := grpc.NewClient(hubAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(64<<20), grpc.MaxSendMsgSize(64<<20))
	ironlinkv1.RegisterLinkServiceServer(srv, &tapService{lt: lt, hub: ironlinkv1.NewLinkServiceClient(cc)})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

type tapService struct {
	ironlinkv1.UnimplementedLinkServiceServer
	lt  *linkTap
	hub ironlinkv1.LinkServiceClient
}

func (s *tapService) Connect(down ironlinkv1.LinkService_ConnectServer) error {
	md, _ := metadata.FromIncomingContext(down.Context())
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(down.Context(), md))
	defer cancel()
	up, err := s.hub.Connect(ctx)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	site, boot := "", ""
	go func() {
		for {
			m, err := down.Recv()
			if err != nil {
				_ = up.CloseSend()
				if ctx.Err() == nil && err.Error() != "EOF" {
					cancel()
				}
				return
			}
			mu.Lock()
			if h := m.GetHello(); h != nil {
				site, boot = h.GetSite(), h.GetBootId()
			}
			if b := m.GetBatch(); b != nil {
				s.lt.sent(site, boot, b)
			}
			mu.Unlock()
			if err := up.Send(m); err != nil {
				return
			}
		}
	}()
	for {
		m, err := up.Recv()
		if err != nil {
			return err
		}
		mu.Lock()
		if a := m.GetAck(); a != nil {
			s.lt.ack(site, boot, a.GetSequence())
		}
		if w := m.GetWelcome(); w != nil {
			s.lt.committedUpTo(site, w.GetLastCommittedSequence())
		}
		mu.Unlock()
		if err := down.Send(m); err != nil {
			return err
		}
	}
}

func (lt *linkTap) sent(site, boot string, b *ironlinkv1.ConditionBatch) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.pending[fmt.Sprintf("%s/%d", boot, b.GetSequence())] = sentBatch{site, b}
	lt.boot[site] = boot
}

// committedUpTo records as committed, in sequence order, the batches of
// site still pending whose sequence is at most last (the hub's Welcome).
func (lt *linkTap) committedUpTo(site string, last uint64) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	var keys []string
	for k, p := range lt.pending {
		if p.site == site && p.batch.GetSequence() <= last {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Compare(lt.pending[a].batch.GetSequence(), lt.pending[b].batch.GetSequence())
	})
	for _, k := range keys {
		lt.seen[k] = true
		lt.acked[site] = append(lt.acked[site], lt.pending[k].batch)
		delete(lt.pending, k)
	}
}

func (lt *linkTap) ack(site, boot string, seq uint64) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	k := fmt.Sprintf("%s/%d", boot, seq)
	if lt.seen[k] {
		return // a resend acked as a duplicate
	}
	p, ok := lt.pending[k]
	if !ok {
		lt.errors = append(lt.errors, fmt.Sprintf("site %s: ack of batch %s that this tap did not see sent", site, k))
		return
	}
	lt.seen[k] = true
	delete(lt.pending, k)
	lt.acked[site] = append(lt.acked[site], p.batch)
}

// checkHistory fails t unless the hub's condition_history for site is,
// per device and condition type, every change in the batches the hub
// committed, in order, none lost, none added (a condition sent again
// unchanged is no change; nor, for CustomerReady, a change of its observed
// generation only, which the history columns cannot show).
func (lt *linkTap) checkHistory(t *testing.T, pool *pgxpool.Pool, site string) {
	t.Helper()
	// The hub acknowledges a batch after its commit: a batch already in
	// the history may still have its ack on the way. Wait (at most 10 s)
	// until the batches the latest satellite sent are acknowledged (those
	// of a killed one may never be); whatever is still pending then counts
	// as not committed.
	_ = harness.Within(10*time.Second, func() error {
		lt.mu.Lock()
		defer lt.mu.Unlock()
		for k, p := range lt.pending {
			if p.site == site && strings.HasPrefix(k, lt.boot[site]+"/") {
				return fmt.Errorf("batch %s not acknowledged yet", k)
			}
		}
		return nil
	})
	lt.mu.Lock()
	want := map[string][]string{}
	for _, b := range lt.acked[site] {
		for _, d := range b.GetDevices() {
			for _, c := range d.GetConditions() {
				k := d.GetDeviceId() + " " + c.GetType()
				v := statusName(c.GetStatus()) + "/" + c.GetReason() + "/" + c.GetMessage()
				if h := want[k]; len(h) == 0 || h[len(h)-1] != v {
					want[k] = append(want[k], v)
				}
			}
		}
	}
	errs := slices.Clone(lt.errors)
	batches := len(lt.acked[site])
	lt.mu.Unlock()
	for _, e := range errs {
		t.Error(e)
	}
	if batches == 0 {
		t.Fatalf("site %s: the tap saw no acknowledged batch", site)
	}
	rows, err := pool.Query(context.Background(), `
		SELECT h.device_id::text || ' ' || h.type, h.status || '/' || h.reason || '/' || h.message
		FROM condition_history h JOIN devices d ON d.id = h.device_id WHERE d.site = $1 ORDER BY h.id`, site)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		if h := got[k]; len(h) > 0 && h[len(h)-1] == v && strings.HasSuffix(k, " CustomerReady") {
			continue
		}
		got[k] = append(got[k], v)
	}
	rows.Close()
	bad := 0
	for k, w := range want {
		if g := got[k]; !slices.Equal(g, w) {
			if bad++; bad <= 5 {
				t.Errorf("site %s %s: history %q, the satellite's acknowledged changes %q", site, k, g, w)
			}
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("site %s: history rows for %s that no acknowledged batch carried", site, k)
		}
	}
	if bad > 5 {
		t.Errorf("site %s: %d (device, type) histories differ in all (%d batches acknowledged)", site, bad, batches)
	}
}

func statusName(s ironlinkv1.ConditionStatus) string {
	switch s {
	case ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE:
		return "True"
	case ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE:
		return "False"
	}
	return "Unknown"
}

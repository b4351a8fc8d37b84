package link

import (
	"context"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/testlog"
)

// TestSiteConditionsWaitForADueSnapshot: a new process's first snapshot
// may wait (for the hub's desired states) after its first poll marked
// InventoryPolled=True. A set with that mark waits with it and goes right
// after it: the mark tells the hub it holds everything that poll saw, and
// sent first it let the hub's policy act on conditions from before the
// link (test/policy TestPolicyLinkEndedFaultClearedAtSite, seen in CI). A
// set without it (no poll yet) goes at once.
func TestSiteConditionsWaitForADueSnapshot(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hub := &scriptedHub{ops: make(chan *ironlinkv1.OperationRequest), got: make(chan struct{}, 1)}
	srv := grpc.NewServer()
	ironlinkv1.RegisterLinkServiceServer(srv, hub)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	site := NewSiteState(nil)
	site.Set(condition.Condition{Type: condition.OpenStackAuthenticated, Status: condition.True, Reason: "Authenticated", Message: "token issued"})
	var ready atomic.Bool // the snapshot can be built (desired states arrived)
	snap := func() ([]*ironlinkv1.DeviceUpdate, bool) {
		if !ready.Load() {
			return nil, false
		}
		return []*ironlinkv1.DeviceUpdate{{DeviceId: "n1"}}, true
	}
	out := NewOutbox()
	c := NewClient(Config{Site: "a", BootID: "b", HubAddr: ln.Addr().String(), SiteState: site,
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		MinBackoff:  10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond},
		out, snap, nopCommands{}, testlog.New(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()

	hub.waitFor(t, "the site conditions without a poll mark", func() bool { return len(hub.order) == 1 })
	// A poll's mark while the snapshot still waits: nothing more goes yet.
	site.Mark(condition.Condition{Type: condition.InventoryPolled, Status: condition.True, Reason: condition.ReasonPollSucceeded, Message: "listed 1 nodes"})
	time.Sleep(300 * time.Millisecond)
	hub.mu.Lock()
	early := slices.Clone(hub.order)
	hub.mu.Unlock()
	if !slices.Equal(early, []string{"site"}) {
		t.Fatalf("sent %v while the snapshot was due and not built, want only the first set [site]", early)
	}
	ready.Store(true)
	out.Push(nil) // as the agent does when the desired states arrive
	hub.waitFor(t, "the snapshot and the held site conditions", func() bool { return len(hub.order) >= 3 })
	hub.mu.Lock()
	got := slices.Clone(hub.order)
	hub.mu.Unlock()
	if !slices.Equal(got, []string{"site", "snapshot", "site"}) {
		t.Fatalf("sent %v, want [site snapshot site]", got)
	}
}

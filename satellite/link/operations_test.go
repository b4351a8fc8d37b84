package link

import (
	"context"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/testlog"
)

// scriptedHub is a LinkService that welcomes every Hello, sends the
// operations it is given and records what the satellite sends.
type scriptedHub struct {
	ironlinkv1.UnimplementedLinkServiceServer
	ops      chan *ironlinkv1.OperationRequest
	mu       sync.Mutex
	hellos   []*ironlinkv1.Hello
	progress []*ironlinkv1.OperationProgress
	// order is what arrived after each Hello, in order: "batch", "snapshot"
	// (a part of one) or "site" (a SiteConditions set).
	order []string
	got   chan struct{}
}

func (h *scriptedHub) Connect(stream ironlinkv1.LinkService_ConnectServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.hellos = append(h.hellos, first.GetHello())
	h.mu.Unlock()
	h.signal()
	if err := stream.Send(&ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Welcome{Welcome: &ironlinkv1.Welcome{Replica: "test"}}}); err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			h.mu.Lock()
			switch {
			case m.GetOperationProgress() != nil:
				h.progress = append(h.progress, m.GetOperationProgress())
			case m.GetBatch().GetSnapshot() != nil:
				h.order = append(h.order, "snapshot")
			case m.GetBatch() != nil:
				h.order = append(h.order, "batch")
			case m.GetSiteConditions() != nil:
				h.order = append(h.order, "site")
			}
			h.mu.Unlock()
			h.signal()
		}
	}()
	for {
		select {
		case op := <-h.ops:
			if err := stream.Send(&ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Operation{Operation: op}}); err != nil {
				return err
			}
		case err := <-errc:
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

func (h *scriptedHub) signal() {
	select {
	case h.got <- struct{}{}:
	default:
	}
}

func (h *scriptedHub) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		h.mu.Lock()
		ok := cond()
		h.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-h.got:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("scripted hub: timed out waiting for %s", what)
		}
	}
}

// opHandler answers every operation with RUNNING then SUCCEEDED.
type opHandler struct {
	c   *Client
	got chan *ironlinkv1.OperationRequest
}

func (o *opHandler) HandleOperation(req *ironlinkv1.OperationRequest) {
	o.got <- req
	o.c.SendOperationProgress(&ironlinkv1.OperationProgress{OperationId: req.GetOperationId(), Attempt: req.GetAttempt(), State: ironlinkv1.OperationState_OPERATION_STATE_RUNNING})
	o.c.SendOperationProgress(&ironlinkv1.OperationProgress{OperationId: req.GetOperationId(), Attempt: req.GetAttempt(), State: ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED})
}

type nopCommands struct{}

func (nopCommands) HandleCommand(context.Context, *ironlinkv1.Command) *ironlinkv1.CommandResult {
	return &ironlinkv1.CommandResult{}
}

// TestOperationsOverTheLink: an OperationRequest from the hub reaches the
// handler, its progress comes back up the link in order (the last one
// final), and a re-Hello announces a capability added later.
func TestOperationsOverTheLink(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hub := &scriptedHub{ops: make(chan *ironlinkv1.OperationRequest, 4), got: make(chan struct{}, 1)}
	srv := grpc.NewServer()
	ironlinkv1.RegisterLinkServiceServer(srv, hub)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	var capsMu sync.Mutex
	caps := []string{"placement"}
	h := &opHandler{got: make(chan *ironlinkv1.OperationRequest, 4)}
	c := NewClient(Config{Site: "a", BootID: "b", HubAddr: ln.Addr().String(),
		DialOptions:  []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		Capabilities: func() []string { capsMu.Lock(); defer capsMu.Unlock(); return slices.Clone(caps) },
		Operations:   h, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond},
		NewOutbox(), func() ([]*ironlinkv1.DeviceUpdate, bool) { return nil, true }, nopCommands{}, testlog.New(t))
	h.c = c
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()

	hub.waitFor(t, "hello", func() bool { return len(hub.hellos) == 1 })
	hub.ops <- &ironlinkv1.OperationRequest{OperationId: "op-1", Attempt: 3, Kind: ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE, DeviceId: "n1"}
	select {
	case req := <-h.got:
		if req.GetOperationId() != "op-1" || req.GetAttempt() != 3 {
			t.Fatalf("handler got %v", req)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the operation never reached the handler")
	}
	hub.waitFor(t, "final progress", func() bool {
		n := len(hub.progress)
		return n > 0 && hub.progress[n-1].GetState() == ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED
	})
	hub.mu.Lock()
	for _, p := range hub.progress {
		if p.GetOperationId() != "op-1" || p.GetAttempt() != 3 {
			t.Errorf("progress %v does not answer op-1 attempt 3", p)
		}
	}
	hub.mu.Unlock()

	capsMu.Lock()
	caps = append(caps, "operations")
	capsMu.Unlock()
	c.Rehello()
	hub.waitFor(t, "second hello with operations", func() bool {
		return len(hub.hellos) >= 2 && slices.Contains(hub.hellos[len(hub.hellos)-1].GetCapabilities(), "operations")
	})
}

// A progress whose send failed is sent again, unless a newer one of the
// same operation replaced it; newer progress replaces older in the queue.
func TestProgressQueueKeepsTheNewestPerOperation(t *testing.T) {
	q := newProgressQueue()
	q.put(&ironlinkv1.OperationProgress{OperationId: "a", Attempt: 1})
	q.put(&ironlinkv1.OperationProgress{OperationId: "b", Attempt: 1})
	q.put(&ironlinkv1.OperationProgress{OperationId: "a", Attempt: 2})
	p := q.take()
	if p.GetOperationId() != "a" || p.GetAttempt() != 2 {
		t.Fatalf("first taken %v, want a/2", p)
	}
	q.putBack(p)
	if p := q.take(); p.GetOperationId() != "a" {
		t.Fatalf("put back entry not first: %v", p)
	}
	q.put(&ironlinkv1.OperationProgress{OperationId: "b", Attempt: 5})
	q.putBack(&ironlinkv1.OperationProgress{OperationId: "b", Attempt: 4})
	if p := q.take(); p.GetAttempt() != 5 {
		t.Fatalf("an older progress put back replaced a newer one: %v", p)
	}
	if q.take() != nil {
		t.Fatal("queue not empty")
	}
}

package fleet_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/app"
	"github.com/ironlink/ironlink/hub/fleet"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// replica is one hub replica's operator API (its own store, pool and LISTEN
// connection) over a shared database, served on bufconn.
type replica struct {
	store *store.Store
	srv   *grpc.Server
	fleet ironlinkv1.FleetServiceClient
}

func startReplica(t *testing.T, url string) *replica {
	t.Helper()
	log := testlog.New(t)
	st := storetest.Open(t, url, log)
	cfg, err := app.Options{DatabaseURL: url, NoAuth: true, Plaintext: true}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	srv := app.NewGRPCServer(cfg, log)
	ironlinkv1.RegisterFleetServiceServer(srv, fleet.NewServer(st, nil, log))
	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient("passthrough:///hub",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return &replica{store: st, srv: srv, fleet: ironlinkv1.NewFleetServiceClient(cc)}
}

// seedSites creates the sites with n healthy, customer-ready (AVAILABLE)
// devices each and returns their ids by site.
func seedSites(t *testing.T, st *store.Store, n int, sites ...string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	out := map[string][]string{}
	now := time.Now().UTC()
	for _, site := range sites {
		sess, err := st.OpenLink(ctx, store.LinkHello{Site: site, Replica: "seed"})
		if err != nil {
			t.Fatal(err)
		}
		var ups []store.DeviceUpdate
		for i := range n {
			id := uuid.NewString()
			out[site] = append(out[site], id)
			var cs []condition.Condition
			for _, ty := range condition.Types {
				s := condition.True
				if ty == condition.InValidationPool || ty == condition.InstanceAllocated || ty == condition.CustomerAllocated {
					s = condition.False
				}
				cs = append(cs, condition.Condition{Type: ty, Status: s, Reason: "Seed", ObservedTime: now, LastTransitionTime: now})
			}
			ups = append(ups, store.DeviceUpdate{DeviceID: id, ObservedTime: now, Conditions: cs,
				Facts: &store.Facts{Name: fmt.Sprintf("%s-node-%d", site, i)}})
		}
		if _, err := st.ApplyBatch(ctx, site, sess.Epoch, store.Batch{Sequence: 1, Devices: ups}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// watched is what a WatchFleet stream delivered.
type watched struct {
	first  string // the cursor of the first (progress) message
	events []*ironlinkv1.WatchFleetResponse
	err    error
}

// watch follows req until its first message and want events arrived, the stream ends, or 30 s
// pass; stop, when non-nil, is called once after stopAfter events (to kill
// the replica mid-stream).
func watch(t *testing.T, c ironlinkv1.FleetServiceClient, req *ironlinkv1.WatchFleetRequest, want int, stopAfter int, stop func()) watched {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.WatchFleet(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var w watched
	for w.first == "" || len(w.events) < want {
		m, err := s.Recv()
		if err != nil {
			w.err = err
			return w
		}
		if w.first == "" {
			w.first = m.GetCursor()
			if m.GetEvent() != nil {
				t.Fatal("the first message must be a progress mark")
			}
			continue
		}
		if m.GetEvent() == nil {
			continue
		}
		w.events = append(w.events, m)
		if stop != nil && len(w.events) == stopAfter {
			stop()
		}
	}
	return w
}

func eventKey(m *ironlinkv1.WatchFleetResponse) string {
	e := m.GetEvent()
	if ds := e.GetDeviceStatus(); ds != nil {
		return fmt.Sprintf("%s status %s %s→%s", m.GetCursor(), ds.GetDeviceId(), ds.GetPreviousStatus(), ds.GetStatus())
	}
	cs := e.GetCommandState()
	return fmt.Sprintf("%s command %s %s→%s", m.GetCursor(), cs.GetCommand().GetCommandId(), cs.GetPreviousState(), cs.GetCommand().GetState())
}

// TestWatchFleetResumesAcrossReplicas: a watcher on replica 1 is cut off
// when replica 1 stops mid-stream while replica 2 takes quarantines and
// releases; resumed on replica 2 from its last cursor it gets exactly the
// events a watcher that never broke got (replica 2 from the same start):
// nothing lost, nothing repeated.
func TestWatchFleetResumesAcrossReplicas(t *testing.T) {
	url := storetest.Database(t)
	r1, r2 := startReplica(t, url), startReplica(t, url)
	// The reference watcher, and the one that breaks, both start at
	// replica 2's head, before the seed.
	head := watch(t, r2.fleet, &ironlinkv1.WatchFleetRequest{}, 0, 0, nil).first
	devs := seedSites(t, r1.store, 4, "demo")["demo"]

	// 4 first statuses; 40 alternating quarantines and releases: 40
	// commands created, 36 superseding a pending one of the same device, 40
	// status changes.
	const ops, total = 40, 4 + 40 + 36 + 40
	created := make(chan string, ops)
	start := make(chan string)
	go func() {
		<-start
		defer close(created)
		ctx := context.Background()
		for i := range ops {
			dev := devs[i%4]
			var cmd *ironlinkv1.OperatorCommand
			if (i/4)%2 == 0 {
				resp, err := r2.fleet.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: dev, Reason: fmt.Sprintf("op %d", i)})
				if err != nil {
					t.Error(err)
					return
				}
				cmd = resp.GetCommand()
			} else {
				resp, err := r2.fleet.ReleaseDevice(ctx, &ironlinkv1.ReleaseDeviceRequest{DeviceId: dev, Reason: fmt.Sprintf("op %d", i)})
				if err != nil {
					t.Error(err)
					return
				}
				cmd = resp.GetCommand()
			}
			created <- cmd.GetCommandId()
			time.Sleep(5 * time.Millisecond)
		}
	}()

	refDone := make(chan watched)
	go func() { refDone <- watch(t, r2.fleet, &ironlinkv1.WatchFleetRequest{Cursor: head}, total, 0, nil) }()
	var broken watched
	brokeDone := make(chan struct{})
	go func() {
		defer close(brokeDone)
		broken = watch(t, r1.fleet, &ironlinkv1.WatchFleetRequest{Cursor: head}, total, 30, r1.srv.Stop)
	}()
	close(start)
	<-brokeDone
	if broken.err == nil || len(broken.events) < 30 || len(broken.events) >= total {
		t.Fatalf("the stream on the stopped replica delivered %d events (err %v): want it cut after 30", len(broken.events), broken.err)
	}
	last := broken.events[len(broken.events)-1].GetCursor()
	rest := watch(t, r2.fleet, &ironlinkv1.WatchFleetRequest{Cursor: last}, total-len(broken.events), 0, nil)
	ref := <-refDone
	if ref.err != nil || rest.err != nil {
		t.Fatalf("reference: %d events, %v; resumed: %d events, %v", len(ref.events), ref.err, len(rest.events), rest.err)
	}
	got := append(broken.events, rest.events...)
	seen := map[string]bool{}
	for i, m := range got {
		if k := eventKey(m); k != eventKey(ref.events[i]) {
			t.Fatalf("event %d: resumed feed %s, unbroken feed %s", i, k, eventKey(ref.events[i]))
		}
		if seen[m.GetCursor()] {
			t.Fatalf("cursor %s delivered twice", m.GetCursor())
		}
		seen[m.GetCursor()] = true
	}
	creations := map[string]int{}
	for _, m := range got {
		if cs := m.GetEvent().GetCommandState(); cs != nil && cs.GetPreviousState() == ironlinkv1.CommandState_COMMAND_STATE_UNSPECIFIED {
			creations[cs.GetCommand().GetCommandId()]++
		}
	}
	for id := range created {
		if creations[id] != 1 {
			t.Errorf("command %s created: %d creation events, want 1", id, creations[id])
		}
	}
	t.Logf("%d events before the replica stopped, %d after resuming elsewhere", len(broken.events), len(rest.events))
}

// TestWatchFleetFilters: site, statuses (into or out of) and kinds keep
// what they say, progress marks carry the cursor past skipped events, and
// bad requests are refused with the field named.
func TestWatchFleetFilters(t *testing.T) {
	ctx := context.Background()
	url := storetest.Database(t)
	r := startReplica(t, url)
	head := watch(t, r.fleet, &ironlinkv1.WatchFleetRequest{}, 0, 0, nil).first
	devs := seedSites(t, r.store, 2, "site-a", "site-b")
	if _, err := r.fleet.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: devs["site-a"][0], Reason: "Xid 79"}); err != nil {
		t.Fatal(err)
	}
	// Events: 4 first statuses (AVAILABLE), 1 AVAILABLE→QUARANTINED, 1 command created.
	for _, tc := range []struct {
		name string
		req  *ironlinkv1.WatchFleetRequest
		want int
	}{
		{"all", &ironlinkv1.WatchFleetRequest{}, 6},
		{"site-b", &ironlinkv1.WatchFleetRequest{Site: "site-b"}, 2},
		{"site-a", &ironlinkv1.WatchFleetRequest{Site: "site-a"}, 4},
		{"QUARANTINED", &ironlinkv1.WatchFleetRequest{Statuses: []ironlinkv1.OperationalStatus{ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_QUARANTINED}}, 2},
		{"commands", &ironlinkv1.WatchFleetRequest{Kinds: []ironlinkv1.FleetEventKind{ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_COMMAND_STATE}}, 1},
		{"site-b commands", &ironlinkv1.WatchFleetRequest{Site: "site-b", Kinds: []ironlinkv1.FleetEventKind{ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_COMMAND_STATE}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Cursor = head
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			s, err := r.fleet.WatchFleet(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if m, err := s.Recv(); err != nil || m.GetCursor() != head || m.GetEvent() != nil {
				t.Fatalf("first message %v, %v: want a progress mark at the cursor asked for", m, err)
			}
			got := collect(ctx, t, s, tc.want)
			if len(got) != tc.want {
				for _, m := range got {
					t.Log(eventKey(m))
				}
				t.Fatalf("%d events, want %d", len(got), tc.want)
			}
			for _, m := range got {
				e := m.GetEvent()
				site := e.GetDeviceStatus().GetSite() + e.GetCommandState().GetCommand().GetSite()
				if tc.req.Site != "" && site != tc.req.Site {
					t.Errorf("event of site %s: %s", site, eventKey(m))
				}
			}
		})
	}
}

// TestWatchFleetRefusesBadRequests: malformed and foreign cursors, unknown
// sites and bad enum filters are refused before anything streams.
func TestWatchFleetRefusesBadRequests(t *testing.T) {
	ctx := context.Background()
	h := newTestHub(t)
	for _, tc := range []struct {
		name string
		req  *ironlinkv1.WatchFleetRequest
		code codes.Code
	}{
		{"malformed cursor", &ironlinkv1.WatchFleetRequest{Cursor: "yesterday"}, codes.InvalidArgument},
		{"cursor from another database", &ironlinkv1.WatchFleetRequest{Cursor: "9000000000000.1.1"}, codes.InvalidArgument},
		{"cursor with an unknown source", &ironlinkv1.WatchFleetRequest{Cursor: "864.9.0"}, codes.InvalidArgument},
		{"cursor with a row id 0", &ironlinkv1.WatchFleetRequest{Cursor: "864.1.0"}, codes.InvalidArgument},
		{"cursor with an id beside source 0", &ironlinkv1.WatchFleetRequest{Cursor: "864.0.7"}, codes.InvalidArgument},
		{"bad site name", &ironlinkv1.WatchFleetRequest{Site: "Not A Site"}, codes.InvalidArgument},
		{"unknown site", &ironlinkv1.WatchFleetRequest{Site: "nowhere"}, codes.NotFound},
		{"unspecified status", &ironlinkv1.WatchFleetRequest{Statuses: []ironlinkv1.OperationalStatus{0}}, codes.InvalidArgument},
		{"unspecified kind", &ironlinkv1.WatchFleetRequest{Kinds: []ironlinkv1.FleetEventKind{0}}, codes.InvalidArgument},
		{"unknown kind", &ironlinkv1.WatchFleetRequest{Kinds: []ironlinkv1.FleetEventKind{42}}, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			s, err := h.Fleet.WatchFleet(cctx, tc.req)
			if err == nil {
				_, err = s.Recv()
			}
			if status.Code(err) != tc.code {
				t.Fatalf("got %v, want %v", err, tc.code)
			}
		})
	}
	// The refusal names the field of the cursor that is wrong.
	for cur, field := range map[string]string{"864.9.0": "field SOURCE", "864.1.0": "field ID", "x.1.1": "field XID"} {
		s, err := h.Fleet.WatchFleet(ctx, &ironlinkv1.WatchFleetRequest{Cursor: cur})
		if err == nil {
			_, err = s.Recv()
		}
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), field) {
			t.Errorf("cursor %s: %v, want InvalidArgument naming %s", cur, err, field)
		}
	}
}

// collectEvents follows req and returns its events once want arrived and
// 1.5 s (three polls) passed without another, or fails after 30 s.
func collectEvents(t *testing.T, c ironlinkv1.FleetServiceClient, req *ironlinkv1.WatchFleetRequest, want int) []*ironlinkv1.FleetEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.WatchFleet(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var out []*ironlinkv1.FleetEvent
	for _, m := range collect(ctx, t, s, want) {
		out = append(out, m.GetEvent())
	}
	return out
}

// collect reads s until want events came, then 1.5 s more (three polls) to
// see that nothing else does, and returns the events' messages; it fails
// when ctx ends first.
func collect(ctx context.Context, t *testing.T, s ironlinkv1.FleetService_WatchFleetClient, want int) []*ironlinkv1.WatchFleetResponse {
	t.Helper()
	msgs := pump(s)
	var got []*ironlinkv1.WatchFleetResponse
	var quiet <-chan time.Time
	if want == 0 {
		quiet = time.After(1500 * time.Millisecond)
	}
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatal("stream ended")
			}
			if m.GetEvent() == nil {
				continue
			}
			got = append(got, m)
			if len(got) == want {
				quiet = time.After(1500 * time.Millisecond)
			}
		case <-quiet:
			return got
		case <-ctx.Done():
			t.Fatalf("%d events after 30 s, want %d", len(got), want)
		}
	}
}

// TestWatchFleetOperationAndPolicyKinds: an operation's creation and state
// changes, a policy decision and a pending action's rejection reach a
// watcher as their kinds, with the operation, decision and pending action
// as they were, and the kinds and site filters select them.
func TestWatchFleetOperationAndPolicyKinds(t *testing.T) {
	ctx := context.Background()
	url := storetest.Database(t)
	r := startReplica(t, url)
	devs := seedSites(t, r.store, 2, "site-a", "site-b")
	head := watch(t, r.fleet, &ironlinkv1.WatchFleetRequest{}, 0, 0, nil).first
	_, ops, err := r.store.CreateOperations(ctx, []store.NewOperation{{ID: uuid.NewString(), Site: "site-a",
		DeviceID: devs["site-a"][0], Kind: "INSPECT", Actor: "ops", Reason: "check"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.store.FailOperation(ctx, ops[0].ID, "no credentials", "CredentialsLost"); err != nil {
		t.Fatal(err)
	}
	d, _, err := r.store.RecordPolicyDecision(ctx, store.PolicyDecision{DeviceID: devs["site-a"][1], Site: "site-a",
		Kind: store.DecisionKindQuarantine, TriggerID: 1, Action: "PENDING", Reason: "HeldByGuard", Rule: "faulted"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.ResolvePendingActions(ctx, []int64{d.PendingID}, false, "ops", "not now"); err != nil {
		t.Fatal(err)
	}
	kinds := func(k ...ironlinkv1.FleetEventKind) []ironlinkv1.FleetEventKind { return k }
	const (
		opKind       = ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_OPERATION_STATE
		decisionKind = ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_POLICY_DECISION
		pendingKind  = ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_PENDING_ACTION
	)

	got := collectEvents(t, r.fleet, &ironlinkv1.WatchFleetRequest{Cursor: head, Kinds: kinds(opKind)}, 2)
	if len(got) != 2 {
		t.Fatalf("%d operation events, want 2: %v", len(got), got)
	}
	for i, want := range []struct{ prev, state ironlinkv1.OperationState }{
		{ironlinkv1.OperationState_OPERATION_STATE_UNSPECIFIED, ironlinkv1.OperationState_OPERATION_STATE_PENDING},
		{ironlinkv1.OperationState_OPERATION_STATE_PENDING, ironlinkv1.OperationState_OPERATION_STATE_FAILED},
	} {
		e := got[i].GetOperationState()
		if got[i].GetKind() != opKind || e.GetOperation().GetOperationId() != ops[0].ID || e.GetPreviousState() != want.prev ||
			e.GetOperation().GetState() != want.state {
			t.Errorf("operation event %d: %v, want %v→%v", i, got[i], want.prev, want.state)
		}
	}
	if e := got[1].GetOperationState().GetOperation(); e.GetLastError() != "no credentials" || e.GetEndTime() == nil {
		t.Errorf("FAILED event: last_error %q, end time %v", e.GetLastError(), e.GetEndTime())
	}

	got = collectEvents(t, r.fleet, &ironlinkv1.WatchFleetRequest{Cursor: head, Kinds: kinds(decisionKind, pendingKind)}, 2)
	if len(got) != 2 || got[0].GetKind() != decisionKind || got[1].GetKind() != pendingKind {
		t.Fatalf("policy events %v: want a decision, then a pending action", got)
	}
	if e := got[0].GetPolicyDecision(); e.GetDecision().GetId() != d.ID || e.GetDecision().GetAction() != ironlinkv1.PolicyAction_POLICY_ACTION_PENDING ||
		e.GetDecision().GetPendingActionId() != d.PendingID || e.GetDeviceName() != "site-a-node-1" {
		t.Errorf("decision event %v", e)
	}
	if e := got[1].GetPendingAction(); e.GetPendingAction().GetId() != d.PendingID ||
		e.GetPendingAction().GetState() != ironlinkv1.PendingActionState_PENDING_ACTION_STATE_REJECTED ||
		e.GetPreviousState() != ironlinkv1.PendingActionState_PENDING_ACTION_STATE_PENDING || e.GetPendingAction().GetResolvedBy() != "ops" {
		t.Errorf("pending action event %v", e)
	}

	if got := collectEvents(t, r.fleet, &ironlinkv1.WatchFleetRequest{Cursor: head, Kinds: kinds(pendingKind)}, 1); len(got) != 1 || got[0].GetKind() != pendingKind {
		t.Errorf("pending actions only: %v", got)
	}
	if got := collectEvents(t, r.fleet, &ironlinkv1.WatchFleetRequest{Cursor: head, Site: "site-b", Kinds: kinds(opKind, decisionKind, pendingKind)}, 0); len(got) != 0 {
		t.Errorf("site-b: %v, want none", got)
	}
	// Without a kinds filter they come along with the others (the one
	// command the policy did not create: none; statuses: none since head).
	if got := collectEvents(t, r.fleet, &ironlinkv1.WatchFleetRequest{Cursor: head, Site: "site-a"}, 4); len(got) != 4 {
		t.Errorf("site-a, all kinds: %d events, want 4: %v", len(got), got)
	}
}

// pump delivers the stream's messages on a channel, closed when Recv fails.
func pump(s ironlinkv1.FleetService_WatchFleetClient) <-chan *ironlinkv1.WatchFleetResponse {
	msgs := make(chan *ironlinkv1.WatchFleetResponse)
	go func() {
		defer close(msgs)
		for {
			m, err := s.Recv()
			if err != nil {
				return
			}
			msgs <- m
		}
	}()
	return msgs
}

package link_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/link"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/syncbuf"
	"github.com/ironlink/ironlink/internal/testlog"
	"github.com/ironlink/ironlink/test/grpctest"
)

// newStore migrates a fresh database and opens a store on it.
func newStore(t testing.TB) (*store.Store, string) { return storetest.New(t, nil) }

// startReplica serves a hub replica over st as hub/app builds it
// (test/grpctest: production interceptors, authentication on, every link
// stream checked by linktest.Checker).
func startReplica(t *testing.T, st *store.Store, replica string) *grpctest.Hub {
	t.Helper()
	return serveReplica(t, st, replica, testlog.New(t))
}

// serveReplica is startReplica logging to log.
func serveReplica(t *testing.T, st *store.Store, replica string, log *slog.Logger) *grpctest.Hub {
	t.Helper()
	return grpctest.Start(t, st, grpctest.Options{Replica: replica, Log: log,
		Link: link.Config{HeartbeatInterval: time.Hour, CommandSweep: time.Hour}})
}

// connect opens a link for site, authenticated as the site's satellite,
// and reads the hub's Welcome and DesiredStates.
func connect(t *testing.T, h *grpctest.Hub, site string) ironlinkv1.LinkService_ConnectClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	s, err := ironlinkv1.NewLinkServiceClient(h.Satellite(t, site)).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Hello{Hello: &ironlinkv1.Hello{
		Site: site, BootId: uuid.NewString(), Version: "test"}}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"welcome", "desired states"} {
		m, err := s.Recv()
		if err != nil {
			t.Fatalf("waiting for %s: %v", want, err)
		}
		if (want == "welcome" && m.GetWelcome() == nil) || (want == "desired states" && m.GetDesiredStates() == nil) {
			t.Fatalf("got %v, want %s", m, want)
		}
	}
	return s
}

// recvCode reads from s until the hub ends the link and returns its code.
func recvCode(t *testing.T, s ironlinkv1.LinkService_ConnectClient) (codes.Code, string) {
	t.Helper()
	for {
		if _, err := s.Recv(); err != nil {
			st := status.Convert(err)
			return st.Code(), st.Message()
		}
	}
}

func siteConds(cs ...*ironlinkv1.Condition) *ironlinkv1.ConnectRequest {
	return &ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_SiteConditions{SiteConditions: &ironlinkv1.SiteConditions{Conditions: cs}}}
}

func wireCond(typ condition.Type, st ironlinkv1.ConditionStatus, reason string, at time.Time) *ironlinkv1.Condition {
	return &ironlinkv1.Condition{Type: string(typ), Status: st, Reason: reason, ObservedTime: timestamppb.New(at)}
}

// storedSiteConditions returns what ListSites shows for site.
func storedSiteConditions(t *testing.T, st *store.Store, site string) []condition.Condition {
	t.Helper()
	sites, err := st.ListSites(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sites {
		if s.Name == site {
			return s.Conditions
		}
	}
	return nil
}

// waitSiteConditions waits until site's stored conditions satisfy ok.
func waitSiteConditions(t *testing.T, st *store.Store, site string, ok func([]condition.Condition) bool) []condition.Condition {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cs := storedSiteConditions(t, st, site)
		if ok(cs) {
			return cs
		}
		if time.Now().After(deadline) {
			t.Fatalf("site %s conditions never got there: %+v", site, cs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const (
	condTrue  = ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE
	condFalse = ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE
)

// TestSiteConditionsStoredAndBadOnesRefused: a link's site conditions are
// stored and listed; a malformed set ends the link with InvalidArgument
// and changes nothing; a type the hub does not know (a newer satellite's)
// is left out and the rest of the set is stored, on a link that stays up.
func TestSiteConditionsStoredAndBadOnesRefused(t *testing.T) {
	st, url := newStore(t)
	c := startReplica(t, st, "r1")
	now := time.Now().UTC().Truncate(time.Microsecond)

	s := connect(t, c, "site-a")
	if err := s.Send(siteConds(
		wireCond(condition.OpenStackAuthenticated, condTrue, "Authenticated", now),
		wireCond(condition.OrphanDetection, condFalse, "Standalone", now),
	)); err != nil {
		t.Fatal(err)
	}
	good := waitSiteConditions(t, st, "site-a", func(cs []condition.Condition) bool { return len(cs) == 2 })
	if good[0].Type != condition.OpenStackAuthenticated || good[0].Status != condition.True ||
		good[1].Type != condition.OrphanDetection || good[1].Status != condition.False || good[1].Reason != "Standalone" {
		t.Fatalf("stored %+v", good)
	}
	_ = s.CloseSend()
	recvCode(t, s)

	later := now.Add(time.Minute)
	many := make([]*ironlinkv1.Condition, link.MaxSiteConditions+1)
	for i := range many {
		many[i] = wireCond(condition.OpenStackAuthenticated, condTrue, "Authenticated", later)
	}
	tests := []struct {
		name  string
		conds []*ironlinkv1.Condition
		msg   string
	}{
		{"too many", many, "at most 16"},
		{"type twice", []*ironlinkv1.Condition{
			wireCond(condition.OpenStackAuthenticated, condFalse, "AuthenticationFailed", later),
			wireCond(condition.OpenStackAuthenticated, condTrue, "Authenticated", later),
		}, "twice"},
		{"device condition type", []*ironlinkv1.Condition{wireCond(condition.Enrolled, condFalse, "Enroll", later)}, "Enrolled"},
		{"unspecified status", []*ironlinkv1.Condition{wireCond(condition.OpenStackAuthenticated, 0, "AuthenticationFailed", later)}, "status"},
		{"empty reason", []*ironlinkv1.Condition{wireCond(condition.OpenStackAuthenticated, condFalse, "", later)}, "reason"},
		{"no observed time", []*ironlinkv1.Condition{{Type: string(condition.OpenStackAuthenticated), Status: condFalse, Reason: "AuthenticationFailed"}}, "observed time"},
		{"huge message", []*ironlinkv1.Condition{{Type: string(condition.OpenStackAuthenticated), Status: condFalse, Reason: "AuthenticationFailed",
			Message: strings.Repeat("x", 5000), ObservedTime: timestamppb.New(later)}}, "message"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := connect(t, c, "site-a")
			if err := s.Send(siteConds(tc.conds...)); err != nil {
				t.Fatal(err)
			}
			code, msg := recvCode(t, s)
			if code != codes.InvalidArgument || !strings.Contains(msg, tc.msg) {
				t.Fatalf("link ended with %v %q, want InvalidArgument containing %q", code, msg, tc.msg)
			}
			if got := storedSiteConditions(t, st, "site-a"); len(got) != 2 || got[0] != good[0] || got[1] != good[1] {
				t.Fatalf("stored conditions changed to %+v", got)
			}
			if n := pgtest.Count(t, url, `SELECT count(*) FROM site_conditions`); n != 2 {
				t.Fatalf("site_conditions rows %d, want 2", n)
			}
		})
	}

	s = connect(t, c, "site-a")
	if err := s.Send(siteConds(
		wireCond("FirmwareCatalogReachable", condFalse, "Unreachable", later),
		wireCond(condition.OpenStackAuthenticated, condFalse, "AuthenticationFailed", later),
		wireCond(condition.OrphanDetection, condFalse, "Standalone", later),
	)); err != nil {
		t.Fatal(err)
	}
	newer := waitSiteConditions(t, st, "site-a", func(cs []condition.Condition) bool { return len(cs) == 2 && cs[0].Status == condition.False })
	if newer[0].Type != condition.OpenStackAuthenticated || newer[1].Type != condition.OrphanDetection {
		t.Fatalf("stored %+v, want the two known types only", newer)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM site_conditions`); n != 2 {
		t.Fatalf("site_conditions rows %d, want 2 (the unknown type left out)", n)
	}
	_ = s.CloseSend()
	if code, msg := recvCode(t, s); msg != io.EOF.Error() {
		t.Fatalf("link with an unknown site condition type ended with %v %q, want a clean close (EOF)", code, msg)
	}
}

// TestSupersededLinkCannotOverwriteSiteConditions: a link superseded by a
// newer link on another replica (which does not close it) is refused with
// Aborted when it sends site conditions, and the newer link's set stays.
func TestSupersededLinkCannotOverwriteSiteConditions(t *testing.T) {
	st, _ := newStore(t)
	r1, r2 := startReplica(t, st, "r1"), startReplica(t, st, "r2")
	now := time.Now().UTC().Truncate(time.Microsecond)

	old := connect(t, r1, "site-a")
	newer := connect(t, r2, "site-a")
	if err := newer.Send(siteConds(wireCond(condition.OpenStackAuthenticated, condTrue, "Authenticated", now))); err != nil {
		t.Fatal(err)
	}
	waitSiteConditions(t, st, "site-a", func(cs []condition.Condition) bool { return len(cs) == 1 })

	if err := old.Send(siteConds(wireCond(condition.OpenStackAuthenticated, condFalse, "AuthenticationFailed", now.Add(time.Minute)))); err != nil {
		t.Fatal(err)
	}
	if code, msg := recvCode(t, old); code != codes.Aborted {
		t.Fatalf("superseded link ended with %v %q, want Aborted", code, msg)
	}
	if got := storedSiteConditions(t, st, "site-a"); len(got) != 1 || got[0].Status != condition.True {
		t.Fatalf("superseded link overwrote the site conditions: %+v", got)
	}
}

// TestSupersededOnSameReplicaCarriesReason: a link superseded by a newer
// link of its site on the same replica ends with Aborted and the ErrorInfo
// reason LINK_SUPERSEDED, as one superseded through the database (another
// replica's link; TestSupersededLinkCannotOverwriteSiteConditions) does.
func TestSupersededOnSameReplicaCarriesReason(t *testing.T) {
	st, _ := newStore(t)
	r1 := startReplica(t, st, "r1")
	old := connect(t, r1, "site-a")
	connect(t, r1, "site-a")
	var err error
	for err == nil {
		_, err = old.Recv()
	}
	if code, reason := status.Code(err), grpcerr.Reason(err); code != codes.Aborted || reason != grpcerr.ReasonLinkSuperseded {
		t.Fatalf("superseded link ended with %v reason %q (%v), want Aborted %s", code, reason, err, grpcerr.ReasonLinkSuperseded)
	}
}

// TestInstanceMismatchesInBatches: a batch's instance mismatches reach the
// device's facts; a batch with a malformed one ends the link with
// InvalidArgument and writes no device.
func TestInstanceMismatchesInBatches(t *testing.T) {
	st, url := newStore(t)
	c := startReplica(t, st, "r1")
	now := time.Now().UTC().Truncate(time.Microsecond)
	good := func() *ironlinkv1.InstanceMismatch {
		return &ironlinkv1.InstanceMismatch{Kind: ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NOVA_UNKNOWN,
			IronicInstanceUuid: uuid.NewString(), NovaServerId: uuid.NewString(), NovaServerStatus: "DELETED",
			NovaProjectId: strings.Repeat("a", 32), FirstSeenTime: timestamppb.New(now.Add(-5 * time.Minute))}
	}
	batch := func(seq uint64, id string, ms ...*ironlinkv1.InstanceMismatch) *ironlinkv1.ConnectRequest {
		return &ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Batch{Batch: &ironlinkv1.ConditionBatch{Sequence: seq,
			Devices: []*ironlinkv1.DeviceUpdate{{DeviceId: id, ObservedTime: timestamppb.New(now),
				Conditions: []*ironlinkv1.Condition{wireCond(condition.Enrolled, condTrue, "Enrolled", now)},
				Facts:      &ironlinkv1.DeviceFacts{Name: "node-1", InstanceMismatches: ms}}}}}}
	}

	many := make([]*ironlinkv1.InstanceMismatch, link.MaxInstanceMismatches+1)
	for i := range many {
		many[i] = good()
	}
	tests := []struct {
		name   string
		mutate func(m *ironlinkv1.InstanceMismatch)
		ms     []*ironlinkv1.InstanceMismatch
		msg    string
	}{
		{"kind unspecified", func(m *ironlinkv1.InstanceMismatch) { m.Kind = 0 }, nil, "kind"},
		{"kind unknown", func(m *ironlinkv1.InstanceMismatch) { m.Kind = 9 }, nil, "kind"},
		{"long server id", func(m *ironlinkv1.InstanceMismatch) { m.NovaServerId = strings.Repeat("x", 65) }, nil, "nova_server_id"},
		{"long instance uuid", func(m *ironlinkv1.InstanceMismatch) { m.IronicInstanceUuid = strings.Repeat("x", 65) }, nil, "ironic_instance_uuid"},
		{"long project", func(m *ironlinkv1.InstanceMismatch) { m.NovaProjectId = strings.Repeat("x", 65) }, nil, "nova_project_id"},
		{"long status", func(m *ironlinkv1.InstanceMismatch) { m.NovaServerStatus = strings.Repeat("X", 33) }, nil, "nova_server_status"},
		{"no first seen time", func(m *ironlinkv1.InstanceMismatch) { m.FirstSeenTime = nil }, nil, "first_seen_time"},
		{"too many", nil, many, "at most 16"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms := tc.ms
			if ms == nil {
				m := good()
				tc.mutate(m)
				ms = []*ironlinkv1.InstanceMismatch{m}
			}
			s := connect(t, c, "site-a")
			if err := s.Send(batch(1, uuid.NewString(), ms...)); err != nil {
				t.Fatal(err)
			}
			code, msg := recvCode(t, s)
			if code != codes.InvalidArgument || !strings.Contains(msg, tc.msg) {
				t.Fatalf("link ended with %v %q, want InvalidArgument containing %q", code, msg, tc.msg)
			}
			if n := pgtest.Count(t, url, `SELECT count(*) FROM devices`); n != 0 {
				t.Fatalf("%d devices written by a refused batch", n)
			}
		})
	}

	// A good batch is acked and its mismatches are on the device.
	s := connect(t, c, "site-a")
	id := uuid.NewString()
	m := good()
	if err := s.Send(batch(1, id, m)); err != nil {
		t.Fatal(err)
	}
	for {
		r, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.GetAck() != nil {
			break
		}
	}
	d, err := st.GetDevice(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	want := store.InstanceMismatch{Kind: store.MismatchNovaUnknown, IronicInstanceUUID: m.GetIronicInstanceUuid(),
		NovaServerID: m.GetNovaServerId(), NovaServerStatus: "DELETED", NovaProjectID: m.GetNovaProjectId(), FirstSeenTime: now.Add(-5 * time.Minute)}
	if got := d.Facts.InstanceMismatches; len(got) != 1 || got[0] != want {
		t.Fatalf("stored mismatches %+v, want [%+v]", got, want)
	}
}

// The link's lifecycle ends carry ErrorInfo reasons like every other
// refusal: a draining replica ends open links and refuses new ones
// (Unavailable REPLICA_DRAINING), and a client that never says hello is
// DeadlineExceeded HELLO_TIMEOUT.
func TestLifecycleEndsCarryReasons(t *testing.T) {
	st, _ := newStore(t)
	r1 := startReplica(t, st, "r1")
	open := connect(t, r1, "site-a")
	r1.Link.Drain()
	var err error
	for err == nil {
		_, err = open.Recv()
	}
	if code, reason := status.Code(err), grpcerr.Reason(err); code != codes.Unavailable || reason != grpcerr.ReasonReplicaDraining {
		t.Fatalf("open link on a draining replica ended %v reason %q (%v), want Unavailable %s", code, reason, err, grpcerr.ReasonReplicaDraining)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := ironlinkv1.NewLinkServiceClient(r1.Satellite(t, "site-b")).Connect(ctx)
	if err == nil {
		_, err = s.Recv()
	}
	if code, reason := status.Code(err), grpcerr.Reason(err); code != codes.Unavailable || reason != grpcerr.ReasonReplicaDraining {
		t.Fatalf("new link to a draining replica: %v reason %q (%v), want Unavailable %s", code, reason, err, grpcerr.ReasonReplicaDraining)
	}

	r2 := grpctest.Start(t, st, grpctest.Options{Replica: "r2", Log: testlog.New(t),
		Link: link.Config{HeartbeatInterval: time.Hour, CommandSweep: time.Hour, HelloTimeout: 200 * time.Millisecond}})
	s, err = ironlinkv1.NewLinkServiceClient(r2.Satellite(t, "site-a")).Connect(ctx)
	if err == nil {
		_, err = s.Recv() // and say nothing
	}
	if code, reason := status.Code(err), grpcerr.Reason(err); code != codes.DeadlineExceeded || reason != grpcerr.ReasonHelloTimeout {
		t.Fatalf("silent client: %v reason %q (%v), want DeadlineExceeded %s", code, reason, err, grpcerr.ReasonHelloTimeout)
	}
}

// A satellite whose client leaves the roster (a reload, grpctest's Remove)
// loses its open link at once, Unauthenticated CLIENT_REVOKED, while the
// other site's link stays; a new link with the removed key is refused.
func TestRosterRemovalRevokesTheLink(t *testing.T) {
	st, _ := newStore(t)
	r1 := startReplica(t, st, "r1")
	gone := connect(t, r1, "site-a")
	connect(t, r1, "site-b")          // stays open
	conn := r1.Satellite(t, "site-a") // dialled with the key before it is removed
	r1.Remove(t, auth.SatelliteClientID("site-a"))
	var err error
	for err == nil {
		_, err = gone.Recv()
	}
	if code, reason := status.Code(err), grpcerr.Reason(err); code != codes.Unauthenticated || reason != grpcerr.ReasonClientRevoked {
		t.Fatalf("link of a removed client ended %v reason %q (%v), want Unauthenticated %s", code, reason, err, grpcerr.ReasonClientRevoked)
	}
	if n := r1.Link.Links(); n != 1 {
		t.Fatalf("%d links open after the removal, want site-b's", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := ironlinkv1.NewLinkServiceClient(conn).Connect(ctx)
	if err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a new link with the removed client's key: %v, want Unauthenticated", err)
	}
}

// Two satellite processes for one site (same key, different boot ids) take
// the link from each other: the hub warns, naming the site, when a link
// replaces another process's link that was open less than
// link.TakeoverWarnAge; the first link of a site is no takeover.
func TestBriefTakeoverByAnotherProcessIsWarned(t *testing.T) {
	st, _ := newStore(t)
	var logs syncbuf.Buffer
	r1 := startLoggedReplica(t, st, &logs)
	connect(t, r1, "site-a")
	if strings.Contains(logs.String(), "link taken over") {
		t.Fatalf("the site's first link was logged as a takeover:\n%s", logs.String())
	}
	connect(t, r1, "site-a") // another boot id, a moment later
	out := logs.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "link taken over") || !strings.Contains(out, "site=site-a") {
		t.Fatalf("no takeover warning naming the site:\n%s", out)
	}
}

package link_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/link"
	"github.com/ironlink/ironlink/hub/link/linktest"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// runLink opens an in-memory link for site (authenticated as its satellite,
// checked by a linktest.Checker), sends hello, then msgs, closes its side
// and returns the status the hub ended the link with and the protocol
// violations seen.
func runLink(t testing.TB, srv *link.Server, site string, hello *ironlinkv1.Hello, msgs ...*ironlinkv1.ConnectRequest) (*status.Status, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(authn.NewContext(context.Background(), auth.Identity{
		ClientID: auth.SatelliteClientID(site), Site: site,
		Scopes: []string{auth.ScopeDeviceConditionCreate, auth.ScopeDeviceUpdate}}), 30*time.Second)
	defer cancel()
	s := linktest.NewStream(ctx)
	var chk linktest.Checker
	cs := chk.Wrap(s)
	done := make(chan error, 1)
	go func() {
		err := srv.Connect(cs)
		cs.Returned()
		done <- err
	}()
	go func() { // read everything: the hub must never block on Send
		for {
			select {
			case <-s.Sent():
			case <-ctx.Done():
				return
			}
		}
	}()
	all := append([]*ironlinkv1.ConnectRequest{{Msg: &ironlinkv1.ConnectRequest_Hello{Hello: hello}}}, msgs...)
	for _, m := range all {
		if !pushOrEnd(s, m, done) {
			break
		}
	}
	s.CloseSend()
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the hub did not end the link within 20 s")
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		err = nil
	}
	return status.Convert(err), chk.Violations()
}

// pushOrEnd pushes m unless the hub ended the link first (then its error is
// put back on done).
func pushOrEnd(s *linktest.Stream, m *ironlinkv1.ConnectRequest, done chan error) bool {
	pushed := make(chan bool, 1)
	go func() { pushed <- s.Push(m) }()
	select {
	case ok := <-pushed:
		return ok
	case err := <-done:
		done <- err
		return false
	}
}

// FuzzLinkMessage sends one arbitrary message (any kind) on a link of
// site-a, over a real store holding site-a and site-b (devices, finished
// commands), through the in-memory stream. Properties: no panic; the link
// ends OK or with InvalidArgument, ResourceExhausted or PermissionDenied —
// never Internal, Unknown or Unavailable, and never with a value PostgreSQL
// had to refuse (validation comes first); the hub keeps the protocol
// (linktest.Checker); and when the link ends with an error, no table but
// the link's own bookkeeping (sites, replay cache) changed.
func FuzzLinkMessage(f *testing.F) {
	st, url := newStore(f)
	devA, cmdA := seedCommand(f, st, "site-a")
	devB, cmdB := seedCommand(f, st, "site-b")
	ctx := context.Background()
	for _, c := range []struct {
		site string
		cmd  store.Command
	}{{"site-a", cmdA}, {"site-b", cmdB}} {
		if _, err := st.RecordResult(ctx, c.site, store.CommandResult{CommandID: c.cmd.ID, DeviceID: c.cmd.DeviceID,
			Generation: c.cmd.Generation, Success: true}); err != nil {
			f.Fatal(err)
		}
	}
	srv := link.NewServer(st, link.Config{Replica: "fuzz", HeartbeatInterval: time.Hour, CommandSweep: time.Hour},
		testlog.New(f))

	now := timestamppb.Now()
	cond := func(typ condition.Type) *ironlinkv1.Condition {
		return &ironlinkv1.Condition{Type: string(typ), Status: ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE, Reason: "Fuzz", ObservedTime: now}
	}
	seeds := []*ironlinkv1.ConnectRequest{
		{Msg: &ironlinkv1.ConnectRequest_Batch{Batch: &ironlinkv1.ConditionBatch{Sequence: 10, Devices: []*ironlinkv1.DeviceUpdate{{DeviceId: uuid.NewString(),
			ObservedTime: now, Conditions: []*ironlinkv1.Condition{cond(condition.Enrolled)}, Facts: &ironlinkv1.DeviceFacts{Name: "n",
				InstanceMismatches: []*ironlinkv1.InstanceMismatch{{Kind: ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NOVA_UNKNOWN, FirstSeenTime: now}}}}}}}},
		{Msg: &ironlinkv1.ConnectRequest_Batch{Batch: &ironlinkv1.ConditionBatch{Sequence: 11, Devices: []*ironlinkv1.DeviceUpdate{{DeviceId: devB, ObservedTime: now}}}}},
		{Msg: &ironlinkv1.ConnectRequest_Batch{Batch: &ironlinkv1.ConditionBatch{Sequence: 12, Snapshot: &ironlinkv1.SnapshotPart{SnapshotId: "s\x00", Final: true}}}},
		{Msg: &ironlinkv1.ConnectRequest_CommandResult{CommandResult: &ironlinkv1.CommandResult{CommandId: cmdA.ID, DeviceId: devB, Generation: 1, Error: "x"}}},
		{Msg: &ironlinkv1.ConnectRequest_CommandResult{CommandResult: &ironlinkv1.CommandResult{CommandId: cmdB.ID, DeviceId: devB, Generation: 1}}},
		{Msg: &ironlinkv1.ConnectRequest_CommandResult{CommandResult: &ironlinkv1.CommandResult{CommandId: cmdA.ID, DeviceId: devA, Generation: 1, Error: "\x00"}}},
		{Msg: &ironlinkv1.ConnectRequest_DriftCorrection{DriftCorrection: &ironlinkv1.DriftCorrection{DeviceId: devA, Generation: 1, Detail: "d", CorrectTime: now}}},
		{Msg: &ironlinkv1.ConnectRequest_DriftCorrection{DriftCorrection: &ironlinkv1.DriftCorrection{DeviceId: devB, Generation: 1}}},
		{Msg: &ironlinkv1.ConnectRequest_SiteConditions{SiteConditions: &ironlinkv1.SiteConditions{Conditions: []*ironlinkv1.Condition{cond(condition.OpenStackAuthenticated)}}}},
		{Msg: &ironlinkv1.ConnectRequest_Heartbeat{Heartbeat: &ironlinkv1.Heartbeat{SentTime: now}}},
		{Msg: &ironlinkv1.ConnectRequest_DesiredStatesRequest{DesiredStatesRequest: &ironlinkv1.DesiredStatesRequest{}}},
		{Msg: &ironlinkv1.ConnectRequest_Hello{Hello: &ironlinkv1.Hello{Site: "site-b"}}},
		{},
	}
	for _, m := range seeds {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
	}
	hello, _ := proto.Marshal(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Hello{Hello: &ironlinkv1.Hello{
		Site: "site-a", AppliedGenerations: []*ironlinkv1.AppliedGeneration{{DeviceId: devB, Generation: 1}}}}})
	f.Add(hello, true)

	f.Fuzz(func(t *testing.T, data []byte, asHello bool) {
		var m ironlinkv1.ConnectRequest
		if proto.Unmarshal(data, &m) != nil {
			return // not decodable: gRPC refuses it before the hub sees it
		}
		h := &ironlinkv1.Hello{Site: "site-a", BootId: "fuzz"}
		var msgs []*ironlinkv1.ConnectRequest
		if asHello && m.GetHello() != nil {
			h = m.GetHello() // the message is the hello itself
		} else {
			msgs = append(msgs, &m)
		}
		skip := []string{"jti_replay", "sites", "goose_db_version"}
		before := pgtest.Checksums(t, url, skip...)
		st, violations := runLink(t, srv, "site-a", h, msgs...)
		for _, v := range violations {
			t.Errorf("protocol violation: %s", v)
		}
		switch st.Code() {
		case codes.OK, codes.InvalidArgument, codes.ResourceExhausted, codes.PermissionDenied:
		default:
			t.Fatalf("link ended %v %q", st.Code(), st.Message())
		}
		if strings.Contains(st.Message(), "SQLSTATE") {
			t.Fatalf("PostgreSQL refused a value validation let through: %q", st.Message())
		}
		if grpcerr.Reason(st.Err()) == "" && st.Code() != codes.OK {
			t.Fatalf("refusal without an ErrorInfo reason: %v %q", st.Code(), st.Message())
		}
		if st.Code() != codes.OK {
			if changed := pgtest.ChangedTables(before, pgtest.Checksums(t, url, skip...)); len(changed) > 0 {
				t.Fatalf("link ended %v %q but changed tables %v", st.Code(), st.Message(), changed)
			}
		}
	})
}

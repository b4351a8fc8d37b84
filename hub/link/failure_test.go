package link_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/link"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/test/grpctest"
)

// fastRetryReplica serves a replica (test/grpctest: production wiring)
// whose sweep runs every 20 ms and whose failure backoff is 10 ms, so a
// failure that is resent at all is resent within a few sweeps.
func fastRetryReplica(t *testing.T, st *store.Store) *grpctest.Hub {
	t.Helper()
	return grpctest.Start(t, st, grpctest.Options{Replica: "r1", Link: link.Config{
		HeartbeatInterval: time.Hour, CommandSweep: 20 * time.Millisecond,
		Delivery: store.DeliveryPolicy{ResendAfter: time.Hour, FailureBackoff: 10 * time.Millisecond, MaxFailureBackoff: 10 * time.Millisecond},
	}})
}

// commands reads s in the background and passes on every Command.
func commands(s ironlinkv1.LinkService_ConnectClient) <-chan *ironlinkv1.Command {
	out := make(chan *ironlinkv1.Command, 64)
	go func() {
		defer close(out)
		for {
			m, err := s.Recv()
			if err != nil {
				return
			}
			if c := m.GetCommand(); c != nil {
				out <- c
			}
		}
	}()
	return out
}

// nextCommand returns the next command within d, or nil.
func nextCommand(cmds <-chan *ironlinkv1.Command, d time.Duration) *ironlinkv1.Command {
	select {
	case c := <-cmds:
		return c
	case <-time.After(d):
		return nil
	}
}

// TestFailureClassDecidesResend: over a real link, a result classified
// PERMANENT is stored with its class and the command is not sent again
// (not by the sweep, not at a new link), while a TRANSIENT or unclassified
// one is sent again after its backoff. A bad failure_reason ends the link
// with InvalidArgument and changes nothing.
func TestFailureClassDecidesResend(t *testing.T) {
	tests := []struct {
		name   string
		class  ironlinkv1.FailureClass
		reason string
		resent bool
	}{
		{"permanent", ironlinkv1.FailureClass_FAILURE_CLASS_PERMANENT, "NodeNotFound", false},
		{"transient", ironlinkv1.FailureClass_FAILURE_CLASS_TRANSIENT, "ServiceUnavailable", true},
		{"unspecified (an older satellite)", ironlinkv1.FailureClass_FAILURE_CLASS_UNSPECIFIED, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st, _ := newStore(t)
			c := fastRetryReplica(t, st)
			s := connect(t, c, "site-a")
			cmds := commands(s)
			id := uuid.NewString()
			now := time.Now().UTC()
			if err := s.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Batch{Batch: &ironlinkv1.ConditionBatch{Sequence: 1,
				Devices: []*ironlinkv1.DeviceUpdate{{DeviceId: id, ObservedTime: timestamppb.New(now),
					Conditions: []*ironlinkv1.Condition{wireCond(condition.Enrolled, condTrue, "Enrolled", now)}}}}}}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { _, err := st.GetDevice(ctx, id); return err == nil })
			q, err := st.SetDesiredImpairment(ctx, id, store.ImpairmentQuarantined, "op", "why", "operator-api")
			if err != nil {
				t.Fatal(err)
			}
			cmd := nextCommand(cmds, 10*time.Second)
			if cmd == nil || cmd.GetCommandId() != q.ID {
				t.Fatalf("command %v, want %s", cmd, q.ID)
			}
			if err := s.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_CommandResult{CommandResult: &ironlinkv1.CommandResult{
				CommandId: q.ID, DeviceId: id, Generation: q.Generation, Error: "gate: quarantine: ironic: node not found",
				FailureClass: tc.class, FailureReason: tc.reason}}}); err != nil {
				t.Fatal(err)
			}
			// Wait for the error, not for FAILED: a resent command is SENT
			// again within a sweep, keeping its last error and class.
			waitFor(t, func() bool { g, _ := st.GetCommand(ctx, q.ID); return g.LastError != "" })
			g, _ := st.GetCommand(ctx, q.ID)
			wantClass := map[ironlinkv1.FailureClass]store.FailureClass{
				ironlinkv1.FailureClass_FAILURE_CLASS_PERMANENT: store.FailurePermanent,
				ironlinkv1.FailureClass_FAILURE_CLASS_TRANSIENT: store.FailureTransient,
			}[tc.class]
			if g.FailureClass != wantClass || g.FailureReason != tc.reason {
				t.Fatalf("stored class %q/%q, want %q/%q", g.FailureClass, g.FailureReason, wantClass, tc.reason)
			}
			// A resend comes within a few 20 ms sweeps of the 10 ms backoff;
			// none in 25 sweeps means none.
			wait := 500 * time.Millisecond
			if tc.resent {
				wait = 10 * time.Second
			}
			again := nextCommand(cmds, wait)
			if (again != nil) != tc.resent {
				t.Fatalf("resent: %v, want %v", again, tc.resent)
			}
			if tc.resent {
				return
			}
			// Nor at a new link, which resends whatever is unfinished.
			s2 := connect(t, c, "site-a")
			if again := nextCommand(commands(s2), 500*time.Millisecond); again != nil {
				t.Fatalf("a new link sent the permanently failed command: %v", again)
			}
		})
	}
}

// TestBadFailureReasonRefused: a failure_reason that is not one CamelCase
// word ends the link with InvalidArgument and records nothing.
func TestBadFailureReasonRefused(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "site-a", Replica: "seed"})
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	now := time.Now().UTC()
	if _, err := st.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{{DeviceID: id, ObservedTime: now,
		Conditions: []condition.Condition{{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}}}}}); err != nil {
		t.Fatal(err)
	}
	q, err := st.SetDesiredImpairment(ctx, id, store.ImpairmentQuarantined, "op", "why", "operator-api")
	if err != nil {
		t.Fatal(err)
	}
	s := connect(t, startReplica(t, st, "r1"), "site-a")
	if err := s.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_CommandResult{CommandResult: &ironlinkv1.CommandResult{
		CommandId: q.ID, DeviceId: id, Generation: q.Generation, Error: "x",
		FailureClass: ironlinkv1.FailureClass_FAILURE_CLASS_PERMANENT, FailureReason: "not one word\x00"}}}); err != nil {
		t.Fatal(err)
	}
	if code, msg := recvCode(t, s); code != codes.InvalidArgument {
		t.Fatalf("link ended with %v %q, want InvalidArgument", code, msg)
	}
	if g, _ := st.GetCommand(ctx, q.ID); g.State == store.CommandFailed || g.FailureClass != "" {
		t.Fatalf("refused result recorded: %+v", g)
	}
}

// waitFor polls ok every 10 ms for up to 10 s.
func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10 s")
		}
	}
}

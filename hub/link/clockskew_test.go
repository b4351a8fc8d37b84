package link_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/syncbuf"
	"github.com/ironlink/ironlink/test/grpctest"
)

// startLoggedReplica is startReplica with the server's Info log kept in logs.
func startLoggedReplica(t *testing.T, st *store.Store, logs *syncbuf.Buffer) *grpctest.Hub {
	t.Helper()
	return serveReplica(t, st, "r1", slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
}

var year9000 = time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC)

// TestFutureSiteConditionsClampedNotFrozen: a satellite whose clock is far
// ahead sends site conditions observed in the year 9000. The hub stores
// them with its receive time instead, warns once, and a later genuine set
// replaces them.
func TestFutureSiteConditionsClampedNotFrozen(t *testing.T) {
	st, _ := newStore(t)
	var logs syncbuf.Buffer
	c := startLoggedReplica(t, st, &logs)
	s := connect(t, c, "site-a")

	before := time.Now()
	if err := s.Send(siteConds(wireCond(condition.OpenStackAuthenticated, condFalse, "AuthenticationFailed", year9000))); err != nil {
		t.Fatal(err)
	}
	got := waitSiteConditions(t, st, "site-a", func(cs []condition.Condition) bool { return len(cs) == 1 })
	after := time.Now()
	if o, tr := got[0].ObservedTime, got[0].LastTransitionTime; o.Before(before.Add(-time.Millisecond)) || o.After(after) || tr.After(after) {
		t.Fatalf("stored observed %v transition %v, want the hub's receive time (between %v and %v)", o, tr, before, after)
	}
	// The same skew again: still clamped, warned only once on this link.
	if err := s.Send(siteConds(wireCond(condition.OpenStackAuthenticated, condFalse, "AuthenticationFailed", year9000.Add(time.Hour)))); err != nil {
		t.Fatal(err)
	}
	// A genuine set, observed after the hub received the skewed ones.
	genuine := time.Now().UTC().Truncate(time.Microsecond).Add(time.Second)
	if err := s.Send(siteConds(wireCond(condition.OpenStackAuthenticated, condTrue, "Authenticated", genuine))); err != nil {
		t.Fatal(err)
	}
	got = waitSiteConditions(t, st, "site-a", func(cs []condition.Condition) bool {
		return len(cs) == 1 && cs[0].Status == condition.True
	})
	if !got[0].ObservedTime.Equal(genuine) {
		t.Fatalf("genuine set stored with observed time %v, want %v", got[0].ObservedTime, genuine)
	}
	wantClockWarnings(t, &logs, 1)
}

// TestFutureDeviceConditionsClampedNotFrozen: the same for a device in a
// condition batch (device observed time, condition times, instance
// mismatch first-seen time).
func TestFutureDeviceConditionsClampedNotFrozen(t *testing.T) {
	st, _ := newStore(t)
	var logs syncbuf.Buffer
	c := startLoggedReplica(t, st, &logs)
	s := connect(t, c, "site-a")
	id := uuid.NewString()
	batch := func(seq uint64, at time.Time, st ironlinkv1.ConditionStatus, reason string) *ironlinkv1.ConnectRequest {
		return &ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Batch{Batch: &ironlinkv1.ConditionBatch{Sequence: seq,
			Devices: []*ironlinkv1.DeviceUpdate{{DeviceId: id, ObservedTime: timestamppb.New(at),
				Conditions: []*ironlinkv1.Condition{wireCond(condition.MaintenanceClear, st, reason, at)},
				Facts: &ironlinkv1.DeviceFacts{Name: "node-1", InstanceMismatches: []*ironlinkv1.InstanceMismatch{{
					Kind: ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NODE_UNAWARE, NovaServerId: uuid.NewString(),
					NovaServerStatus: "ACTIVE", FirstSeenTime: timestamppb.New(at)}}}}}}}}
	}
	waitAck := func(seq uint64) {
		t.Helper()
		for {
			r, err := s.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if r.GetAck().GetSequence() == seq {
				return
			}
		}
	}
	maint := func() condition.Condition {
		t.Helper()
		d, err := st.GetDevice(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range d.Conditions {
			if c.Type == condition.MaintenanceClear {
				return c
			}
		}
		t.Fatalf("no MaintenanceClear on %+v", d)
		return condition.Condition{}
	}

	before := time.Now()
	if err := s.Send(batch(1, year9000, condFalse, "Manual")); err != nil {
		t.Fatal(err)
	}
	waitAck(1)
	after := time.Now()
	d, err := st.GetDevice(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	c1 := maint()
	for name, v := range map[string]time.Time{
		"device observed_at": *d.ObservedAt, "condition observed_time": c1.ObservedTime,
		"condition last_transition_time": c1.LastTransitionTime, "mismatch first_seen_time": d.Facts.InstanceMismatches[0].FirstSeenTime,
	} {
		if v.Before(before.Add(-time.Millisecond)) || v.After(after) {
			t.Errorf("%s stored as %v, want the hub's receive time (between %v and %v)", name, v, before, after)
		}
	}

	genuine := time.Now().UTC().Truncate(time.Microsecond).Add(time.Second)
	if err := s.Send(batch(2, genuine, condTrue, "NoMaintenance")); err != nil {
		t.Fatal(err)
	}
	waitAck(2)
	if c2 := maint(); c2.Status != condition.True || !c2.ObservedTime.Equal(genuine) {
		t.Fatalf("genuine batch after a skewed one: MaintenanceClear %+v", c2)
	}
	wantClockWarnings(t, &logs, 1)
}

// TestUnchangedSiteConditionsLoggedAtDebug: a set resent with only a newer
// observed time is not logged at Info; a change of status is.
func TestUnchangedSiteConditionsLoggedAtDebug(t *testing.T) {
	st, _ := newStore(t)
	var logs syncbuf.Buffer
	c := startLoggedReplica(t, st, &logs)
	s := connect(t, c, "site-a")
	now := time.Now().UTC().Truncate(time.Microsecond)
	for i, sc := range []struct {
		st     ironlinkv1.ConditionStatus
		reason string
	}{{condTrue, "Authenticated"}, {condTrue, "Authenticated"}, {condFalse, "AuthenticationFailed"}} {
		at := now.Add(time.Duration(i) * time.Millisecond)
		if err := s.Send(siteConds(wireCond(condition.OpenStackAuthenticated, sc.st, sc.reason, at))); err != nil {
			t.Fatal(err)
		}
		waitSiteConditions(t, st, "site-a", func(cs []condition.Condition) bool { return len(cs) == 1 && cs[0].ObservedTime.Equal(at) })
	}
	if n := strings.Count(logs.String(), "site conditions"); n != 2 {
		t.Fatalf("%d Info lines about site conditions, want 2 (first set and the change); log:\n%s", n, logs.String())
	}
}

// wantClockWarnings fails t unless the replica logged the satellite's clock
// ahead exactly n times (once per skewed link, not per message).
func wantClockWarnings(t *testing.T, logs *syncbuf.Buffer, n int) {
	t.Helper()
	if got := strings.Count(logs.String(), "satellite clock ahead"); got != n {
		t.Fatalf("%d clock warnings, want %d; log:\n%s", got, n, logs.String())
	}
}

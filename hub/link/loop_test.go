package link_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/link"
	"github.com/ironlink/ironlink/hub/link/linktest"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// inMemoryLink calls srv.Connect for site on a linktest.Stream (checked by
// a linktest.Checker, reported at cleanup) as the site's authenticated
// satellite, sends the hello and reads Welcome and DesiredStates.
func inMemoryLink(t *testing.T, srv *link.Server, site string) *linktest.Stream {
	t.Helper()
	ctx, cancel := context.WithCancel(authn.NewContext(context.Background(), auth.Identity{
		ClientID: auth.SatelliteClientID(site), Site: site,
		Scopes: []string{auth.ScopeDeviceConditionCreate, auth.ScopeDeviceUpdate}}))
	s := linktest.NewStream(ctx)
	var chk linktest.Checker
	cs := chk.Wrap(s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Connect(cs)
		cs.Returned()
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		for _, v := range chk.Violations() {
			t.Errorf("link protocol violation: %s", v)
		}
	})
	s.Push(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Hello{Hello: &ironlinkv1.Hello{Site: site, BootId: "b1"}}})
	if m := s.Next(t, 10*time.Second); m.GetWelcome() == nil {
		t.Fatalf("first message %v, want a welcome", m)
	}
	if m := s.Next(t, 10*time.Second); m.GetDesiredStates() == nil {
		t.Fatalf("second message %v, want desired states", m)
	}
	return s
}

// seedCommand registers a device of site and quarantines it; it returns
// the device and the PENDING command.
func seedCommand(t testing.TB, st *store.Store, site string) (string, store.Command) {
	t.Helper()
	ctx := context.Background()
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: site, BootID: "seed", Replica: "seed"})
	if err != nil {
		t.Fatal(err)
	}
	dev := uuid.NewString()
	now := time.Now()
	if _, err := st.ApplyBatch(ctx, site, sess.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{{DeviceID: dev, ObservedTime: now,
		Conditions: []condition.Condition{{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}}}}}); err != nil {
		t.Fatal(err)
	}
	cmd, err := st.SetDesiredImpairment(ctx, dev, store.ImpairmentQuarantined, "op", "bad GPU", "operator-api")
	if err != nil {
		t.Fatal(err)
	}
	return dev, cmd
}

// lockDevice holds a row lock on device id (as a slow transaction would)
// until the returned function is called.
func lockDevice(t *testing.T, url, id string) (release func()) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM devices WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	var once atomic.Bool
	release = func() {
		if once.CompareAndSwap(false, true) {
			_ = tx.Rollback(ctx)
			_ = c.Close(ctx)
		}
	}
	t.Cleanup(release)
	return release
}

// waitLockWaiters waits until n queries of the test database wait for a lock.
func waitLockWaiters(t *testing.T, url string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for pgtest.Count(t, url, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) < n {
		if time.Now().After(deadline) {
			t.Fatalf("no query of the hub waits for the test's lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func drain(s *linktest.Stream) {
	for {
		select {
		case <-s.Sent():
		default:
			return
		}
	}
}

// TestLoopSendsWhileResultWriteWaitsAndResultPrecedesResend: while the
// database holds a command result's write (a lock on the device row), the
// link keeps sending heartbeats and acking batches of other devices — its
// loop does not wait on the database — and it does not resend the command
// whose result it holds, although the command is overdue (resend after
// 1 ms, sweep every 10 ms): the result is recorded before the next
// delivery decision. Once the lock goes, the command is SUCCEEDED.
// (Before the loop's writes moved to a worker, the loop blocked in
// RecordResult: no heartbeat, no ack.)
func TestLoopSendsWhileResultWriteWaitsAndResultPrecedesResend(t *testing.T) {
	st, url := newStore(t)
	dev, cmd := seedCommand(t, st, "site-a")
	srv := link.NewServer(st, link.Config{Replica: "r1", HeartbeatInterval: 20 * time.Millisecond, CommandSweep: 10 * time.Millisecond,
		Delivery: store.DeliveryPolicy{ResendAfter: time.Millisecond, FailureBackoff: time.Millisecond, MaxFailureBackoff: time.Millisecond}},
		testlog.New(t))
	s := inMemoryLink(t, srv, "site-a")
	for {
		if c := s.Next(t, 10*time.Second).GetCommand(); c != nil && c.GetCommandId() == cmd.ID {
			break
		}
	}

	release := lockDevice(t, url, dev)
	s.Push(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_CommandResult{CommandResult: &ironlinkv1.CommandResult{
		CommandId: cmd.ID, DeviceId: dev, Generation: cmd.Generation, Success: true, Detail: "trait removed"}}})
	waitLockWaiters(t, url, 1)
	drain(s) // sent before the result's write started waiting: allowed

	other := uuid.NewString()
	now := time.Now()
	s.Push(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Batch{Batch: &ironlinkv1.ConditionBatch{Sequence: 2,
		Devices: []*ironlinkv1.DeviceUpdate{{DeviceId: other, ObservedTime: timestamppb.New(now),
			Conditions: []*ironlinkv1.Condition{wireCond(condition.Enrolled, condTrue, "Enrolled", now)}}}}}})
	// Watched for 500 ms (25 heartbeat intervals, 500 resend waits), and
	// longer until the batch's ack came: the ack waits for the batch's
	// commit, which a loaded CI machine's PostgreSQL (fsync on) can take
	// more than 500 ms to do. The result's write stays blocked throughout.
	var heartbeats, acks int
	window, limit := time.After(500*time.Millisecond), time.After(30*time.Second)
	for windowOver := false; !windowOver || acks == 0; {
		select {
		case m := <-s.Sent():
			switch {
			case m.GetHeartbeat() != nil:
				heartbeats++
			case m.GetAck() != nil:
				acks++
			case m.GetCommand().GetCommandId() == cmd.ID:
				t.Fatalf("command %s resent while its result was waiting to be recorded", cmd.ID)
			}
		case <-window:
			windowOver = true
		case <-limit:
			t.Fatalf("no ack of the batch in 30 s while a result write waited (%d heartbeats)", heartbeats)
		}
	}
	if heartbeats == 0 || acks != 1 {
		t.Fatalf("while a result write waited: %d heartbeats, %d acks; want heartbeats and the batch's ack", heartbeats, acks)
	}
	release()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := st.GetCommand(context.Background(), cmd.ID)
		if err != nil {
			t.Fatal(err)
		}
		if c.State == store.CommandSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("command %s is %s after the lock went, want SUCCEEDED", cmd.ID, c.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLoopStopsReadingWhenWritesBackUp: with the database holding every
// result write, the hub takes at most MaxPendingWrites results (plus the
// one being written and the one its reader holds) and then stops reading
// the stream, instead of queueing without bound; when the database frees
// up, it takes and records the rest.
func TestLoopStopsReadingWhenWritesBackUp(t *testing.T) {
	st, url := newStore(t)
	dev, cmd := seedCommand(t, st, "site-a")
	srv := link.NewServer(st, link.Config{Replica: "r1", HeartbeatInterval: time.Hour, CommandSweep: time.Hour},
		testlog.New(t))
	s := inMemoryLink(t, srv, "site-a")
	release := lockDevice(t, url, dev)

	const n = link.MaxPendingWrites + 10
	var pushed atomic.Int32
	go func() {
		for range n {
			if !s.Push(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_CommandResult{CommandResult: &ironlinkv1.CommandResult{
				CommandId: cmd.ID, DeviceId: dev, Generation: cmd.Generation, Success: true}}}) {
				return
			}
			pushed.Add(1)
		}
	}()
	waitLockWaiters(t, url, 1)
	// Let the reader take everything it will take.
	for last := int32(-1); last != pushed.Load(); time.Sleep(200 * time.Millisecond) {
		last = pushed.Load()
	}
	if got, bound := pushed.Load(), int32(link.MaxPendingWrites+2); got > bound {
		t.Fatalf("hub took %d results while the database held them, bound %d", got, bound)
	}
	release()
	deadline := time.Now().Add(10 * time.Second)
	for pushed.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("hub took only %d of %d results after the database freed up", pushed.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c, _ := st.GetCommand(context.Background(), cmd.ID); c.State != store.CommandSucceeded {
		t.Fatalf("command %s", c.State)
	}
}

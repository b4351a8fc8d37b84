package link_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/link"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/testlog"
)

func lastSeenAge(t *testing.T, st *store.Store, site string) time.Duration {
	t.Helper()
	var secs float64
	if err := st.Pool().QueryRow(context.Background(),
		`SELECT extract(epoch FROM now() - last_seen_at) FROM sites WHERE name = $1`, site).Scan(&secs); err != nil {
		t.Fatal(err)
	}
	return time.Duration(secs * float64(time.Second))
}

func heartbeat() *ironlinkv1.ConnectRequest {
	return &ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Heartbeat{Heartbeat: &ironlinkv1.Heartbeat{SentTime: timestamppb.Now()}}}
}

// TestHeartbeatsRecordedAtTheFlushNotEach: a heartbeat writes nothing by
// itself; the replica's flush records it (last_seen_at just now).
func TestHeartbeatsRecordedAtTheFlushNotEach(t *testing.T) {
	st, _ := newStore(t)
	srv := link.NewServer(st, link.Config{Replica: "r1"}, testlog.New(t))
	s := inMemoryLink(t, srv, "site-a")
	if _, err := st.Pool().Exec(context.Background(), `UPDATE sites SET last_seen_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		s.Push(heartbeat())
	}
	// The loop handles a link's messages in order: its answer to a request
	// sent after the heartbeats shows it has handled them.
	s.Push(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_DesiredStatesRequest{DesiredStatesRequest: &ironlinkv1.DesiredStatesRequest{}}})
	if m := s.Next(t, 10*time.Second); m.GetDesiredStates() == nil {
		t.Fatalf("answer %v, want the desired states asked for after the heartbeats", m)
	}
	if d := lastSeenAge(t, st, "site-a"); d < 59*time.Minute {
		t.Fatalf("last_seen_at moved to %s ago before any flush: heartbeats write one by one", d)
	}
	srv.FlushLastSeen(context.Background())
	if d := lastSeenAge(t, st, "site-a"); d > 5*time.Second {
		t.Fatalf("after the flush last_seen_at is %s ago, want the heartbeats' time", d)
	}
}

// TestFlushEndsALinkFencedElsewhere: once a newer link of the site opened on
// another replica, this replica's flush neither refreshes the site for the
// old link nor keeps that link: it ends.
func TestFlushEndsALinkFencedElsewhere(t *testing.T) {
	st, _ := newStore(t)
	srv := link.NewServer(st, link.Config{Replica: "r1"}, testlog.New(t))
	s := inMemoryLink(t, srv, "site-a")
	if _, err := st.OpenLink(context.Background(), store.LinkHello{Site: "site-a", BootID: "b2", Replica: "r2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(context.Background(), `UPDATE sites SET last_seen_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	s.Push(heartbeat())
	deadline := time.Now().Add(10 * time.Second)
	for srv.Links() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the fenced link is still open after flushes")
		}
		srv.FlushLastSeen(context.Background())
		time.Sleep(20 * time.Millisecond)
	}
	if d := lastSeenAge(t, st, "site-a"); d < 59*time.Minute {
		t.Fatalf("the fenced link refreshed the site: last seen %s ago", d)
	}
}

package notify_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/hub/store/notify"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/syncbuf"
)

// fixture is a dispatcher on channels "a" and "b" of a fresh database, its
// log, and a connection that sends notifications.
type fixture struct {
	d    *notify.Dispatcher
	logs *syncbuf.Buffer
	send *pgx.Conn
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	logs := &syncbuf.Buffer{}
	d := notify.New(func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, url) },
		[]string{"a", "b"}, slog.New(slog.NewTextHandler(logs, nil)))
	t.Cleanup(d.Close)
	send, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = send.Close(context.Background()) })
	return &fixture{d: d, logs: logs, send: send}
}

func (f *fixture) notify(t *testing.T, channel, payload string) {
	t.Helper()
	if _, err := f.send.Exec(context.Background(), "SELECT pg_notify($1, $2)", channel, payload); err != nil {
		t.Fatal(err)
	}
}

// subscribe returns a channel receiving every payload on channel.
func subscribe(t *testing.T, d *notify.Dispatcher, channel string) (<-chan string, func()) {
	t.Helper()
	got := make(chan string, 4*notify.QueueLen)
	stop := d.Subscribe(channel, func(p string) { got <- p })
	t.Cleanup(stop)
	return got, stop
}

// waitListening notifies probe on channel until got receives it: from then
// on the dispatcher is connected and listening.
func (f *fixture) waitListening(t *testing.T, channel string, got <-chan string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		f.notify(t, channel, "probe")
		select {
		case p := <-got:
			if p == "probe" {
				drain(got)
				return
			}
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("the dispatcher never delivered a probe notification")
		}
	}
}

func drain(c <-chan string) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

// expect fails unless the next payload on got, probes aside, is want.
func expect(t *testing.T, got <-chan string, want string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case p := <-got:
			if p == "probe" {
				continue // a late answer to waitListening
			}
			if p != want {
				t.Fatalf("got payload %q, want %q", p, want)
			}
			return
		case <-timeout:
			t.Fatalf("payload %q not delivered within 5 s", want)
		}
	}
}

// TestFanOutByChannel: every subscriber of a channel gets its
// notifications, and only those of its channel.
func TestFanOutByChannel(t *testing.T) {
	f := newFixture(t)
	a1, _ := subscribe(t, f.d, "a")
	a2, _ := subscribe(t, f.d, "a")
	b, _ := subscribe(t, f.d, "b")
	f.waitListening(t, "a", a1)
	f.notify(t, "a", "for-a")
	f.notify(t, "b", "for-b")
	expect(t, a1, "for-a")
	expect(t, a2, "for-a")
	expect(t, b, "for-b") // not for-a: b's first payload is its own channel's
}

// TestSlowSubscriberBlocksNoOne: a subscriber stuck in its callback does
// not hold up another one on the same channel, even once its queue is full.
func TestSlowSubscriberBlocksNoOne(t *testing.T) {
	f := newFixture(t)
	release := make(chan struct{})
	defer close(release)
	stuck := make(chan struct{}, 1)
	f.d.Subscribe("a", func(string) {
		select {
		case stuck <- struct{}{}:
		default:
		}
		<-release
	})
	fast, _ := subscribe(t, f.d, "a")
	f.waitListening(t, "a", fast)
	<-stuck
	for i := range notify.QueueLen + 10 {
		f.notify(t, "a", strconv.Itoa(i))
		expect(t, fast, strconv.Itoa(i))
	}
}

// TestResubscribesAfterReconnect: when the LISTEN connection is cut, the
// dispatcher connects again and LISTENs on every channel again.
func TestResubscribesAfterReconnect(t *testing.T) {
	f := newFixture(t)
	a, _ := subscribe(t, f.d, "a")
	b, _ := subscribe(t, f.d, "b")
	f.waitListening(t, "a", a)
	ctx := context.Background()
	var pids []int32
	if err := f.send.QueryRow(ctx, `SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&pids); err != nil {
		t.Fatal(err)
	}
	if len(pids) != 1 {
		t.Fatalf("found %d other backends, want the one LISTEN connection", len(pids))
	}
	if _, err := f.send.Exec(ctx, `SELECT pg_terminate_backend($1)`, pids[0]); err != nil {
		t.Fatal(err)
	}
	// pg_terminate_backend only signals: until the backend has exited, a
	// probe could still reach the old connection and prove nothing.
	for deadline := time.Now().Add(10 * time.Second); ; {
		var alive bool
		if err := f.send.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, pids[0]).Scan(&alive); err != nil {
			t.Fatal(err)
		}
		if !alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the terminated LISTEN backend did not exit in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.waitListening(t, "a", a)
	f.waitListening(t, "b", b)
	if l := f.logs.String(); l == "" {
		t.Fatal("a cut connection logged nothing")
	}
}

// TestEndsQuietly: the loop stops when its last subscriber leaves (the last
// WatchFleet client of a replica went away) and on Close; neither is a
// failure, and neither logs a warning.
func TestEndsQuietly(t *testing.T) {
	f := newFixture(t)
	a, stop := subscribe(t, f.d, "a")
	f.waitListening(t, "a", a)
	stop()
	a2, _ := subscribe(t, f.d, "a") // starts the loop again
	f.waitListening(t, "a", a2)
	done := make(chan struct{})
	go func() { f.d.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5 s")
	}
	if l := f.logs.String(); l != "" {
		t.Fatalf("ending the loop logged:\n%s", l)
	}
}

//go:build soak

package soak

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// invFeed is the invariant on the soak's WatchFleet consumer
// (docs/howto/soak.md).
const invFeed = "feed: resumed from its cursor, no event twice"

// faultStalledWatch is the fault that stops the consumer reading.
const faultStalledWatch = "WatchFleet consumer stalled (60 s)"

// watcher is one WatchFleet consumer on hub-a that reads everything,
// resumes from the last cursor it received whenever its stream ends, and
// can be told to stop reading for a while (stall).
type watcher struct {
	fc ironlinkv1.FleetServiceClient

	mu      sync.Mutex
	cursor  string          // last cursor received
	seen    map[string]bool // every event cursor received
	events  int
	resumes int
	behind  int // streams ended ResourceExhausted WATCH_FELL_BEHIND
	bad     []string
	stalled chan struct{} // closed when not stalled
}

func newWatcher(fc ironlinkv1.FleetServiceClient) *watcher {
	w := &watcher{fc: fc, seen: map[string]bool{}, stalled: make(chan struct{})}
	close(w.stalled)
	return w
}

// run follows the feed until ctx ends.
func (w *watcher) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := w.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		w.resumes++
		switch {
		case status.Code(err) == codes.ResourceExhausted && fellBehindCursor(err) != "":
			w.behind++
			if c := fellBehindCursor(err); c != w.cursor {
				w.bad = append(w.bad, fmt.Sprintf("WATCH_FELL_BEHIND names cursor %q, the last one received was %q", c, w.cursor))
			}
		case status.Code(err) == codes.Unavailable, status.Code(err) == codes.Canceled, status.Code(err) == codes.DeadlineExceeded:
			// A hub or database outage: resume.
		default:
			w.bad = append(w.bad, fmt.Sprintf("stream ended with %v", err))
		}
		w.mu.Unlock()
		sleep(ctx, time.Second)
	}
}

// stream runs one WatchFleet stream from the last cursor until it ends.
func (w *watcher) stream(ctx context.Context) error {
	w.mu.Lock()
	cursor := w.cursor
	w.mu.Unlock()
	s, err := w.fc.WatchFleet(ctx, &ironlinkv1.WatchFleetRequest{Cursor: cursor})
	if err != nil {
		return err
	}
	for {
		w.mu.Lock()
		gate := w.stalled
		w.mu.Unlock()
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		m, err := s.Recv()
		if err != nil {
			return err
		}
		w.mu.Lock()
		if c := m.GetCursor(); c != "" {
			if m.GetEvent() != nil {
				if w.seen[c] {
					w.bad = append(w.bad, fmt.Sprintf("event %s received twice", c))
				}
				w.seen[c] = true
				w.events++
			}
			w.cursor = c
		}
		w.mu.Unlock()
	}
}

// stall stops the consumer reading for d (its stream stays open).
func (w *watcher) stall(d time.Duration) {
	w.mu.Lock()
	w.stalled = make(chan struct{})
	gate := w.stalled
	w.mu.Unlock()
	time.Sleep(d)
	close(gate)
}

// report records the consumer's counts and violations with the checker.
func (w *watcher) report(c *checker) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	c.record(invFeed, w.events, w.bad...)
	return fmt.Sprintf("WatchFleet consumer: %d events, %d resumes, %d of them told it fell behind", w.events, w.resumes, w.behind)
}

// fellBehindCursor is the "cursor" of a WATCH_FELL_BEHIND status's
// ErrorInfo ("" for any other error).
func fellBehindCursor(err error) string {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetReason() == "WATCH_FELL_BEHIND" {
			return ei.GetMetadata()["cursor"]
		}
	}
	return ""
}

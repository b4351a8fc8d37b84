package notify

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"
)

// QueueLen is how many payloads a subscriber may have waiting before new
// ones are dropped.
const QueueLen = 256

// ReconnectDelay is how long the loop waits before connecting again after
// the connection dropped or could not be made.
const ReconnectDelay = time.Second

// ConnectFunc opens the dedicated LISTEN connection; the dispatcher closes it.
type ConnectFunc func(ctx context.Context) (*pgx.Conn, error)

// Dispatcher owns one LISTEN connection and fans its notifications out to
// subscribers by channel. Safe for concurrent use.
type Dispatcher struct {
	connect  ConnectFunc
	channels []string
	log      *slog.Logger

	mu     sync.Mutex
	subs   map[string]map[*subscriber]struct{} // by channel
	count  int                                 // subscribers on every channel
	cancel context.CancelFunc                  // of the running loop; nil: none
	closed bool
	loops  sync.WaitGroup // running loops (one, and briefly a stopping one)
}

// subscriber is one Subscribe: its queue is drained by its own goroutine.
type subscriber struct {
	fn    func(payload string)
	queue chan string
	stop  chan struct{}
}

// New returns a dispatcher that LISTENs on channels over connections made
// by connect, logging connection failures to log. It connects when the
// first subscriber subscribes.
func New(connect ConnectFunc, channels []string, log *slog.Logger) *Dispatcher {
	subs := make(map[string]map[*subscriber]struct{}, len(channels))
	for _, c := range channels {
		subs[c] = map[*subscriber]struct{}{}
	}
	return &Dispatcher{connect: connect, channels: slices.Clone(channels), log: log, subs: subs}
}

// Subscribe calls fn with the payload of every notification on channel
// from now on (in order, from one goroutine of its own, never two calls at
// once) until the returned unsubscribe is called; payloads that arrive
// while QueueLen are waiting are dropped. Notifications sent before the
// loop has connected are not seen. It panics when channel is not one the
// dispatcher was made for (a programming error). After Close it does
// nothing.
func (d *Dispatcher) Subscribe(channel string, fn func(payload string)) (unsubscribe func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	set, ok := d.subs[channel]
	if !ok {
		panic(fmt.Sprintf("notify: Subscribe to channel %q, which the dispatcher does not LISTEN on (%v)", channel, d.channels))
	}
	if d.closed {
		return func() {}
	}
	s := &subscriber{fn: fn, queue: make(chan string, QueueLen), stop: make(chan struct{})}
	go s.run()
	set[s] = struct{}{}
	d.count++
	if d.cancel == nil {
		d.start()
	}
	var once sync.Once
	return func() { once.Do(func() { d.unsubscribe(channel, s) }) }
}

func (d *Dispatcher) unsubscribe(channel string, s *subscriber) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.subs[channel][s]; !ok {
		return // Close took it
	}
	delete(d.subs[channel], s)
	close(s.stop)
	d.count--
	if d.count == 0 && d.cancel != nil {
		d.cancel()
		d.cancel = nil
	}
}

// Close stops the loop, ends every subscription and waits until the
// connection is closed. Subscribe does nothing afterwards.
func (d *Dispatcher) Close() {
	d.mu.Lock()
	d.closed = true
	if d.cancel != nil {
		d.cancel()
		d.cancel = nil
	}
	for _, set := range d.subs {
		for s := range set {
			delete(set, s)
			close(s.stop)
		}
	}
	d.count = 0
	d.mu.Unlock()
	d.loops.Wait()
}

// start runs the loop until d.cancel is called; d.mu is held.
func (d *Dispatcher) start() {
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	// failing: an error was logged since the last connection; while the
	// database is away (a restart, a failover) the retries every
	// ReconnectDelay log at debug level, and the reconnection once.
	var failing atomic.Bool
	l := &pgxlisten.Listener{
		Connect: func(ctx context.Context) (*pgx.Conn, error) {
			c, err := d.connect(ctx)
			if err == nil && failing.Swap(false) {
				d.log.Info("notification listener reconnected")
			}
			return c, err
		},
		LogError: func(_ context.Context, err error) {
			if ctx.Err() != nil {
				return // the last subscriber left or Close: not a failure
			}
			if failing.Swap(true) {
				d.log.Debug("notification listener", "err", err)
				return
			}
			d.log.Warn("notification listener", "err", err)
		},
		ReconnectDelay: ReconnectDelay,
	}
	for _, c := range d.channels {
		l.Handle(c, pgxlisten.HandlerFunc(func(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
			d.deliver(n.Channel, n.Payload)
			return nil
		}))
	}
	d.loops.Add(1)
	go func() {
		defer d.loops.Done()
		_ = l.Listen(ctx) // returns only once ctx has ended
	}()
}

// deliver queues payload for every subscriber of channel without waiting.
func (d *Dispatcher) deliver(channel, payload string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for s := range d.subs[channel] {
		select {
		case s.queue <- payload:
		default: // a hint lost: the subscriber's own poll or sweep finds it
		}
	}
}

func (s *subscriber) run() {
	for {
		select {
		case <-s.stop:
			return
		case p := <-s.queue:
			select {
			case <-s.stop:
				return
			default:
			}
			s.fn(p)
		}
	}
}

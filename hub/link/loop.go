package link

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/streamrecv"
)

// Bounds on the work a link may have waiting for the database. When either
// queue is full the loop stops reading the stream (backpressure: gRPC flow
// control then holds the satellite) until a task finishes; it never grows
// a queue without bound and never waits on the database itself.
const (
	// MaxPendingCommits bounds the batches and site-condition sets
	// waiting for a link's committer.
	MaxPendingCommits = 4
	// MaxPendingWrites bounds the results, drift corrections and command
	// reads waiting for a link's writer (one more runs, and the
	// stream's reader holds one message).
	MaxPendingWrites = 16
	// MaxPendingHealth bounds the HealthReports waiting for a link's
	// health queue (one more runs): health reports have a queue of their
	// own, so a burst of them never delays command results.
	MaxPendingHealth = 8
)

// linkLoop holds the per-link state used by the owning goroutine.
type linkLoop struct {
	s      *Server
	stream ironlinkv1.LinkService_ConnectServer
	site   string
	epoch  int64
	id     *auth.Identity
	log    *slog.Logger
	// skewWarned is set once the link has logged that the satellite's
	// clock runs ahead; clockWarned once its heartbeats showed a clock off.
	skewWarned, clockWarned bool
	// lastSequence is the sequence of the last batch received on this
	// link (0 before the first): sequences must increase within a link, so
	// acks do too.
	lastSequence uint64
	// commits runs the writes under the link's fencing epoch that lock the
	// site row, in stream order: condition batches and site conditions. It
	// is pipelined: each is handed to the store's group committer as soon
	// as it is queued, after the one before (lastCommit), and their
	// outcomes (acks) come back in stream order.
	commits *queue
	// lastCommit is the write last handed to the group committer (nil
	// before the first): the next one is submitted after it, so it never
	// commits before it nor past its refusal.
	lastCommit *store.Pending
	// writes runs everything else that touches the database, in order:
	// command results, drift corrections, the
	// reads that decide which commands and desired states to send, and
	// marking commands sent. One FIFO, so a result received before a
	// delivery decision is recorded before that decision reads the commands.
	writes *queue
	// health commits the satellite's HealthReports, apart from writes:
	// one task at a time, each committing every report that waited for it
	// in one transaction (health.go).
	health *queue
	// healthNext is the batch of the health task waiting in health.pending
	// (reports received meanwhile join it); stale once that task started.
	healthNext *healthBatch
	// ops is set when the hello announced operations.Capability: only
	// then are operations delivered (operations.go).
	ops bool
}

// run is the link's loop: the only goroutine that sends on the stream. A
// reader goroutine feeds it the satellite's messages; two queues (commits,
// writes) run the database work off the loop and hand back what to send.
// It returns the status that ends the link.
func (l *linkLoop) run(ctx context.Context, wake <-chan struct{}) error {
	// The unbuffered channel is the backpressure: the reader waits until
	// the loop takes the message, which it does only while both queues
	// have room.
	msgs, recvErr := streamrecv.Start(ctx, l.stream.Recv)
	l.commits = newPipelinedQueue(MaxPendingCommits)
	l.commits.share = &linkShare{shares: &l.s.shares} // fair.go
	defer l.commits.share.release()
	l.writes = newQueue(MaxPendingWrites)
	l.health = newQueue(MaxPendingHealth)
	l.writes.push(l.deliverTask(true)) // SENT commands go out again on a new link
	l.pushOperations(true)             // and RUNNING operations

	hb := time.NewTicker(l.s.cfg.HeartbeatInterval)
	defer hb.Stop()
	sweep := time.NewTicker(l.s.cfg.CommandSweep)
	defer sweep.Stop()
	for {
		var err error
		in := msgs
		if l.commits.full() || l.writes.full() || l.healthFull() {
			in = nil
		}
		l.commits.start(ctx)
		l.writes.start(ctx)
		l.health.start(ctx)
		// Commands first: a delivery or a command result that is ready
		// is sent before any ack of the commits queue that is ready too
		// (select alone picks at random among them).
		select {
		case o := <-l.writes.done:
			if err := l.finish(l.writes, o); err != nil {
				return err
			}
			continue
		default:
		}
		select {
		case o := <-l.commits.done:
			err = l.finish(l.commits, o)
		case o := <-l.writes.done:
			err = l.finish(l.writes, o)
		case o := <-l.health.done:
			err = l.finish(l.health, o)
		case <-ctx.Done():
			return l.ended(ctx)
		case err = <-recvErr:
			if errors.Is(err, io.EOF) {
				l.log.Info("link closed by satellite")
				return l.finishQueued(ctx)
			}
			l.log.Info("link ended", "err", err)
			return err
		case m := <-in:
			err = l.receive(m)
		case <-wake:
			l.writes.pushOnce(l.deliverTask(false))
			l.pushOperations(false)
		case <-sweep.C:
			// Most sweeps end here: the replica's cached answer says the
			// site has nothing due (no task, no query).
			switch fresh, due := l.s.dueCached(l.site); {
			case !fresh:
				l.writes.pushOnce(l.sweepTask())
			case due:
				l.writes.pushOnce(l.deliverTask(false))
			}
			l.pushOperations(false)
		case <-hb.C:
			// On a goroutine of its own (onOwnStack): the send's call chain
			// (the stream's interceptor wrappers, encoding, the transport)
			// would otherwise grow this goroutine's stack, which every idle
			// link keeps for its life.
			onOwnStack(func() {
				err = l.stream.Send(&ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Heartbeat{
					Heartbeat: &ironlinkv1.Heartbeat{SentTime: timestamppb.Now()}}})
			})
		}
		if err != nil {
			return err
		}
	}
}

// drainTimeout bounds how long a link closed by its satellite waits for the
// work it queued before returning.
const drainTimeout = 5 * time.Second

// finishQueued runs the work queued before the satellite closed its side
// (results, corrections, batches it may still want acked) to the end, at
// most drainTimeout, so a satellite that reports and then closes loses
// nothing. It returns nil, or the first error a task ended with.
func (l *linkLoop) finishQueued(ctx context.Context) error {
	deadline := time.NewTimer(drainTimeout)
	defer deadline.Stop()
	for !l.commits.idle() || !l.writes.idle() || !l.health.idle() {
		l.commits.start(ctx)
		l.writes.start(ctx)
		l.health.start(ctx)
		var err error
		select {
		case o := <-l.commits.done:
			err = l.finish(l.commits, o)
		case o := <-l.writes.done:
			err = l.finish(l.writes, o)
		case o := <-l.health.done:
			err = l.finish(l.health, o)
		case <-ctx.Done():
			return l.ended(ctx)
		case <-deadline.C:
			l.log.Warn("link closed with work still queued", "commits", len(l.commits.pending), "writes", len(l.writes.pending), "health", len(l.health.pending))
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ended returns the status for a link whose context ended.
func (l *linkLoop) ended(ctx context.Context) error {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errSuperseded):
		l.log.Info("link superseded by a newer link")
		return grpcerr.LinkSuperseded() // the same status as a link fenced through the database
	case errors.Is(cause, errDraining):
		l.log.Info("link drained")
		return grpcerr.ReplicaDraining()
	case errors.Is(cause, errRevoked):
		return grpcerr.ClientRevoked()
	}
	return grpcerr.FromContext(ctx.Err())
}

// receive validates one satellite message and queues its database work.
// Validation errors (and scope or protocol errors) end the link before
// anything is queued, so a refused message changes nothing.
func (l *linkLoop) receive(m *ironlinkv1.ConnectRequest) error {
	l.s.heard(l.site, l.epoch) // any message is a sign of life (liveness.go)
	switch msg := m.GetMsg().(type) {
	case *ironlinkv1.ConnectRequest_Batch:
		b, err := ToBatch(msg.Batch)
		if err != nil {
			l.log.Warn("batch refused", "err", err)
			return err
		}
		if b.Sequence <= l.lastSequence {
			err := grpcerr.InvalidArgument("batch.sequence", grpcerr.ReasonOutOfRange,
				fmt.Sprintf("batch %d: sequences must increase within a link (previous batch %d)", b.Sequence, l.lastSequence))
			l.log.Warn("batch refused", "err", err)
			return err
		}
		l.lastSequence = b.Sequence
		l.noteSkew(ClampBatch(&b, time.Now()))
		l.commits.push(l.commitTask(b))
	case *ironlinkv1.ConnectRequest_SiteConditions:
		conds, ignored, err := ToSiteConditions(msg.SiteConditions)
		if err != nil {
			l.log.Warn("site conditions refused", "err", err)
			return err
		}
		if len(ignored) > 0 {
			l.log.Warn("site conditions of types this hub does not know ignored (a satellite newer than the hub?)", "types", ignored)
		}
		l.noteSkew(ClampConditions(conds, time.Now()))
		l.commits.push(l.siteConditionsTask(conds))
	case *ironlinkv1.ConnectRequest_CommandResult:
		if err := l.needScope(auth.ScopeDeviceUpdate, "report command results"); err != nil {
			return err
		}
		r, err := ToResult(msg.CommandResult)
		if err != nil {
			return err
		}
		l.writes.push(l.resultTask(r))
	case *ironlinkv1.ConnectRequest_DriftCorrection:
		if err := l.needScope(auth.ScopeDeviceUpdate, "report corrections"); err != nil {
			return err
		}
		c, sk, err := ToCorrection(msg.DriftCorrection, time.Now())
		if err != nil {
			return err
		}
		l.noteSkew(sk)
		l.writes.push(l.correctionTask(c))
	case *ironlinkv1.ConnectRequest_Heartbeat:
		l.noteClock(msg.Heartbeat.GetSentTime(), time.Now())
	case *ironlinkv1.ConnectRequest_DesiredStatesRequest:
		l.writes.push(l.desiredStatesTask())
	case *ironlinkv1.ConnectRequest_OperationProgress:
		return l.receiveProgress(msg.OperationProgress)
	case *ironlinkv1.ConnectRequest_HealthReport:
		return l.receiveHealth(msg.HealthReport)
	case *ironlinkv1.ConnectRequest_Hello:
		return grpcerr.InvalidArgument("hello", grpcerr.ReasonInvalidValue, "hello may only be the first message of a link")
	default:
		return grpcerr.InvalidArgument("msg", grpcerr.ReasonRequired, "empty or unknown message")
	}
	return nil
}

// needScope refuses with PermissionDenied when the link's client lacks scope.
func (l *linkLoop) needScope(scope, what string) error {
	if l.id != nil && !l.id.HasScope(scope) {
		return grpcerr.PermissionDenied(grpcerr.ReasonMissingScope, fmt.Sprintf("client %s lacks scope %s needed to %s", l.id.ClientID, scope, what))
	}
	return nil
}

// finish sends what a finished task produced, in order, then puts its
// follow-up first on the same queue (past the bound: a follow-up is never
// dropped, and runs before any task queued meanwhile) or returns its error,
// which ends the link.
func (l *linkLoop) finish(q *queue, o outcome) error {
	q.taken()
	if o.err != nil {
		return o.err
	}
	for _, m := range o.send {
		if err := l.stream.Send(m); err != nil {
			return err
		}
	}
	if o.then != nil {
		q.pending = append([]task{*o.then}, q.pending...)
	}
	return nil
}

// noteSkew logs, once per link, that the satellite sent times in the
// future (sk from ClampBatch or ClampConditions); nothing when sk is zero.
func (l *linkLoop) noteSkew(sk Skew) {
	if sk.Ahead <= 0 || l.skewWarned {
		return
	}
	l.skewWarned = true
	ahead := sk.Ahead.Round(time.Second).String()
	if sk.Ahead == math.MaxInt64 {
		ahead = "over 290 years" // time.Duration saturated
	}
	l.log.Warn(fmt.Sprintf("satellite clock ahead by %s: its times more than %s in the future are replaced by the hub's receive time (warned once per link)",
		ahead, store.MaxClockSkew), "satellite_time", sk.Latest, "hub_time", sk.Now)
}

// noteClock logs, once per link, that a satellite heartbeat's sent_time
// lies more than store.MaxClockSkew from the hub's receive time now, ahead
// or behind: an operator should fix that clock. (Times ahead are clamped;
// times behind are stored as sent, and make the site's newer reports look
// older than what a correct clock stored before.) Nothing for a missing or
// invalid sent_time.
func (l *linkLoop) noteClock(sent *timestamppb.Timestamp, now time.Time) {
	if l.clockWarned || !sent.IsValid() {
		return
	}
	off := sent.AsTime().Sub(now)
	if off >= -store.MaxClockSkew && off <= store.MaxClockSkew {
		return
	}
	l.clockWarned = true
	dir := "ahead"
	if off < 0 {
		dir, off = "behind", -off
	}
	l.log.Warn(fmt.Sprintf("satellite clock %s by about %s (heartbeat sent_time against the hub's receive time; warned once per link)",
		dir, off.Round(time.Second)), "satellite_time", sent.AsTime(), "hub_time", now)
}

// A task is one piece of a link's database work, run by a queue off the
// loop. kind names it for coalescing (see queue.pushOnce).
type task struct {
	kind string
	run  func(ctx context.Context) outcome
	// submit, when set, is the task's first step, run on the loop itself
	// when a pipelined queue starts the task (it must not wait: it hands
	// the work on, e.g. to the group committer); the function it returns
	// is then run off the loop for the outcome. A queue that is not
	// pipelined runs submit and its result together off the loop.
	submit func(ctx context.Context) func(ctx context.Context) outcome
	// devices is the device updates a write carries, for the link's fair
	// share of the committer (fair.go).
	devices int
}

// runner returns the function a queue runs off the loop for t.
func (t task) runner(ctx context.Context) func(ctx context.Context) outcome {
	if t.submit != nil {
		return t.submit(ctx)
	}
	return t.run
}

// outcome is what a finished task hands back to the loop: messages to send
// in order, then an optional follow-up task, or an error ending the link.
type outcome struct {
	send []*ironlinkv1.ConnectResponse
	then *task
	err  error
}

// queue runs tasks one at a time, in order, each on a goroutine of its
// own that lives only while the task runs (an idle link holds no worker
// and no worker's stack: two per link at 10,000 links per replica).
// Tasks wait in pending (owned by the loop) until start
// runs the next one; full says the loop should stop taking new work.
//
// A pipelined queue instead starts every waiting task at once (each
// task's submit on the loop, in order), at most max+1 in flight, and hands
// their outcomes back strictly in order: a task's outcome reaches done
// only after the loop took the one before it.
type queue struct {
	max     int
	pending []task
	busy    bool // a task runs whose outcome the loop has not taken
	done    chan outcome

	pipelined bool
	// inflight counts the started tasks of a pipelined queue whose
	// outcome the loop has not taken; last is closed once the last
	// started one's outcome was taken (or it gave up).
	inflight int
	last     chan struct{}
	// share, when set, holds a pipelined queue's next task while the
	// link's writes in the committer fill its fair share (fair.go).
	share *linkShare
}

// newQueue returns an empty queue bounded by max waiting tasks.
func newQueue(max int) *queue {
	return &queue{max: max, done: make(chan outcome)}
}

// newPipelinedQueue returns an empty pipelined queue bounded by max+1
// tasks waiting or in flight.
func newPipelinedQueue(max int) *queue {
	q := newQueue(max)
	q.pipelined = true
	q.last = make(chan struct{})
	close(q.last)
	return q
}

// start runs the first waiting task on a new goroutine unless one runs
// already; its outcome arrives on done (or is dropped when ctx ends). A
// pipelined queue starts every waiting task.
func (q *queue) start(ctx context.Context) {
	if q.pipelined {
		for len(q.pending) > 0 {
			t := q.pending[0]
			if q.share != nil && !q.share.admit(t.devices) {
				return
			}
			q.pending = q.pending[1:]
			q.inflight++
			if q.share != nil {
				q.share.started(t.devices)
			}
			wait := t.runner(ctx)
			prev, mine := q.last, make(chan struct{})
			q.last = mine
			go func() {
				defer close(mine)
				o := wait(ctx)
				select {
				case <-prev:
				case <-ctx.Done():
					return
				}
				select {
				case q.done <- o:
				case <-ctx.Done():
				}
			}()
		}
		return
	}
	if q.busy || len(q.pending) == 0 {
		return
	}
	t := q.pending[0]
	q.pending, q.busy = q.pending[1:], true
	go func() {
		o := t.runner(ctx)(ctx)
		select {
		case q.done <- o:
		case <-ctx.Done():
		}
	}()
}

// taken records that the loop took an outcome from done.
func (q *queue) taken() {
	if q.pipelined {
		q.inflight--
		if q.share != nil {
			q.share.finished()
		}
		return
	}
	q.busy = false
}

// full reports whether max tasks are waiting (pipelined: more than max
// waiting or in flight).
func (q *queue) full() bool {
	if q.pipelined {
		return len(q.pending)+q.inflight > q.max
	}
	return len(q.pending) >= q.max
}

// push appends t.
func (q *queue) push(t task) { q.pending = append(q.pending, t) }

// pushOnce appends t unless a task of the same kind is still waiting (not
// yet started): that one will do the same work later anyway.
func (q *queue) pushOnce(t task) {
	for _, p := range q.pending {
		if p.kind == t.kind {
			return
		}
	}
	q.push(t)
}

// idle reports whether no task waits or runs.
func (q *queue) idle() bool { return len(q.pending) == 0 && !q.busy && q.inflight == 0 }

package admission

import (
	"context"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/stats"
)

// Why the gate gives every connection its own context.
//
// gRPC-Go (1.85) makes each stream's context from the connection's when
// the stream's headers arrive — context.WithTimeout when the caller sent a
// grpc-timeout, context.WithCancel otherwise — and then runs the tap. A
// stream the tap refuses is never registered and its context is never
// cancelled: with a deadline, its timer stays armed until the deadline and
// then starts a goroutine to cancel a context nobody holds. A flood of
// refused calls that share a deadline (one client context, as a script
// makes them) thus arms one timer per refused call and, at the deadline,
// starts them all at once: 14,307 goroutines and 44 MiB of stacks in one
// measured instant, doubling the hub's resident memory; with a far
// deadline (grpc-timeout allows hours) the timers are simply kept.
//
// connCtx closes that hole without touching gRPC-Go: it is the direct
// parent of every stream context on its connection and implements
// AfterFunc, which the context package uses instead of a goroutine to
// learn of a child to cancel with its parent. The child registered last is
// the stream whose headers are being read (gRPC-Go reads a connection's
// headers on one goroutine and makes the stream's context just before
// calling the tap), so the tap, refusing a stream, cancels exactly that
// child (timer stopped, nothing kept); an admitted stream's registration
// is dropped when its context ends as usual, and the rest are cancelled
// when the connection ends.

// connCtxKey is the context key under which a connCtx finds itself.
type connCtxKey struct{}

// connCtx is a connection's context: see above. Its zero value is not
// usable; make it with newConnCtx.
type connCtx struct {
	context.Context // the context gRPC-Go made for the connection (values only)

	done chan struct{}
	// refusing is Err's answer while the tap cancels one refused child:
	// the context package's cancel function reads the parent's Err for
	// the child's, and the parent itself is not done.
	refusing atomic.Pointer[error]

	mu      sync.Mutex
	err     error
	nextID  uint64
	funcs   map[uint64]func() // registered children's cancel functions
	pending uint64            // the last registration, not yet seen by the tap (0: none)
}

func newConnCtx(parent context.Context) *connCtx {
	return &connCtx{Context: parent, done: make(chan struct{}), funcs: map[uint64]func(){}}
}

// Done is closed when the connection ends.
func (c *connCtx) Done() <-chan struct{} { return c.done }

// Err is context.Canceled after the connection ended, nil before.
func (c *connCtx) Err() error {
	if e := c.refusing.Load(); e != nil {
		return *e
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Value answers connCtxKey with c itself, anything else from the parent.
func (c *connCtx) Value(key any) any {
	if key == (connCtxKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// AfterFunc registers f (a child's cancel) to run when the connection
// ends; stop unregisters it, reporting whether it had neither run nor
// been stopped. It is what context.WithCancel and WithTimeout call on a
// parent that has it.
func (c *connCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	c.nextID++
	id := c.nextID
	c.funcs[id] = f
	c.pending = id
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.pending == id {
			c.pending = 0
		}
		_, ok := c.funcs[id]
		delete(c.funcs, id)
		return ok
	}
}

// takePending returns the cancel function of the last registered child
// the tap has not seen yet (nil when none), and forgets it either way.
func (c *connCtx) takePending() func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.pending
	if id == 0 {
		return nil
	}
	c.pending = 0
	f := c.funcs[id]
	delete(c.funcs, id)
	return f
}

// seen tells c the tap has seen the stream registered last (admitted:
// its context ends as usual).
func (c *connCtx) seen() {
	c.mu.Lock()
	c.pending = 0
	c.mu.Unlock()
}

// refuse cancels the context of the stream the tap is refusing (ctx, made
// from c by gRPC-Go just before the tap ran), so that its timer, if any,
// is stopped and nothing of it is kept. It reports whether ctx ended.
func (c *connCtx) refuse(ctx context.Context) bool {
	f := c.takePending()
	if f == nil || ctx.Err() != nil {
		return ctx.Err() != nil
	}
	err := error(context.Canceled)
	c.refusing.Store(&err)
	f()
	c.refusing.Store(nil)
	return ctx.Err() != nil
}

// cancel ends c and every child still registered (the connection ended).
func (c *connCtx) cancel() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = context.Canceled
	close(c.done)
	funcs := c.funcs
	c.funcs, c.pending = nil, 0
	c.mu.Unlock()
	for _, f := range funcs {
		f()
	}
}

// connContexts is the stats.Handler that gives each connection a connCtx
// and ends it with the connection. It must be the server's last stats
// handler: one after it would wrap the connCtx and hide its AfterFunc.
type connContexts struct{}

func (connContexts) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return newConnCtx(ctx)
}

func (connContexts) HandleConn(ctx context.Context, s stats.ConnStats) {
	if _, end := s.(*stats.ConnEnd); end {
		if c, ok := ctx.Value(connCtxKey{}).(*connCtx); ok {
			c.cancel()
		}
	}
}

func (connContexts) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (connContexts) HandleRPC(context.Context, stats.RPCStats) {}

// Package admission decides, before the hub reads a request's body, whether
// the request may be read at all, and bounds what reading it may cost:
//
//   - a tap (grpc.InTapHandle, run on the connection's reader when a
//     stream's headers arrive, before any of its message is read) refuses
//     every call to a non-public service whose "authorization: Bearer"
//     token is missing or not authentic (auth.Verifier.Authentic: signed by
//     a roster key, within its times and audience; the replay check stays
//     with hub/authn) with Unauthenticated;
//   - a connection on which MaxRefusedPerConn streams in a row were refused
//     so is closed (the caller may reconnect; an honest client holding a
//     bad token gets its answer long before);
//   - MaxConcurrentStreams per connection and a 32 KiB header list bound a
//     connection's open streams and their headers;
//   - receive size limits per service (Limit, for grpcerr.DecodeOptions):
//     the link's messages up to MaxLinkMessageBytes, every other request up
//     to MaxRequestBytes, ResourceExhausted beyond.
//
// gRPC-Go has one server-wide receive limit (grpc.MaxRecvMsgSize, set to
// the larger of the two): a request of an authenticated caller is read
// whole up to it before the per-service limit refuses it. A caller without
// an authentic token never gets a byte of its body read.
package admission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/auth"
)

// Defaults of the hub's --max-link-message-bytes, --max-request-bytes,
// --max-concurrent-streams and the refusals a connection may collect.
const (
	// DefaultMaxLinkMessageBytes bounds one LinkService message (a batch
	// of condition deltas, a snapshot part): 16 MiB.
	DefaultMaxLinkMessageBytes = 16 << 20
	// DefaultMaxRequestBytes bounds one request of every other service
	// (operator calls, health, reflection): 4 MiB.
	DefaultMaxRequestBytes = 4 << 20
	// DefaultMaxConcurrentStreams is the HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS
	// the hub announces: streams open at once on one connection (a link
	// uses one, the CLI a few).
	DefaultMaxConcurrentStreams = 100
	// DefaultMaxRefusedPerConn is how many streams in a row a connection
	// may have refused Unauthenticated before it is closed.
	DefaultMaxRefusedPerConn = 32
	// MaxHeaderListBytes bounds a request's header list (HTTP/2
	// SETTINGS_MAX_HEADER_LIST_SIZE); a token is at most auth.MaxTokenBytes.
	MaxHeaderListBytes = 32 << 10
)

// Config is the admission limits; zero fields take the defaults.
type Config struct {
	// MaxLinkMessageBytes bounds one LinkService message.
	MaxLinkMessageBytes int
	// MaxRequestBytes bounds one request of any other service.
	MaxRequestBytes int
	// MaxConcurrentStreams bounds the streams open at once per connection.
	MaxConcurrentStreams int
	// MaxRefusedPerConn is the run of Unauthenticated refusals after which
	// a connection is closed.
	MaxRefusedPerConn int
}

// DefaultConfig returns the hub's default limits.
func DefaultConfig() Config {
	return Config{MaxLinkMessageBytes: DefaultMaxLinkMessageBytes, MaxRequestBytes: DefaultMaxRequestBytes,
		MaxConcurrentStreams: DefaultMaxConcurrentStreams, MaxRefusedPerConn: DefaultMaxRefusedPerConn}
}

// Validate reports every bad setting (errors.Join), each naming its flag.
func (c Config) Validate() error {
	var errs []error
	if c.MaxLinkMessageBytes < 0 || c.MaxLinkMessageBytes > 1<<30 {
		errs = append(errs, fmt.Errorf("--max-link-message-bytes %d must be between 1 and 1 GiB (0: default)", c.MaxLinkMessageBytes))
	}
	if c.MaxRequestBytes < 0 || c.MaxRequestBytes > 1<<30 {
		errs = append(errs, fmt.Errorf("--max-request-bytes %d must be between 1 and 1 GiB (0: default)", c.MaxRequestBytes))
	}
	if c.MaxConcurrentStreams < 0 {
		errs = append(errs, fmt.Errorf("--max-concurrent-streams %d must be ≥ 1 (0: default)", c.MaxConcurrentStreams))
	}
	if c.MaxRefusedPerConn < 0 {
		errs = append(errs, fmt.Errorf("refusals per connection %d must be ≥ 1 (0: default)", c.MaxRefusedPerConn))
	}
	return errors.Join(errs...)
}

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxLinkMessageBytes == 0 {
		c.MaxLinkMessageBytes = d.MaxLinkMessageBytes
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = d.MaxRequestBytes
	}
	if c.MaxConcurrentStreams == 0 {
		c.MaxConcurrentStreams = d.MaxConcurrentStreams
	}
	if c.MaxRefusedPerConn == 0 {
		c.MaxRefusedPerConn = d.MaxRefusedPerConn
	}
	return c
}

// Gate is one hub's admission: its tap, limits and connections. Create it
// with New; safe for concurrent use.
type Gate struct {
	cfg     Config
	authn   func(token string) error // nil: no authentication (--no-auth)
	log     *slog.Logger
	mu      sync.Mutex
	conns   map[string]*conn // by remote address
	refused atomic.Int64
	closed  atomic.Int64
	unended atomic.Int64 // refused streams whose context the gate could not end
}

// New returns a Gate with cfg's limits (zero fields: defaults). authentic
// checks a bearer token without I/O (auth.Verifier.Authentic); nil turns
// the token check off (a hub without authentication).
func New(cfg Config, authentic func(token string) error, log *slog.Logger) *Gate {
	return &Gate{cfg: cfg.withDefaults(), authn: authentic, log: log, conns: map[string]*conn{}}
}

// Config returns the limits in force (defaults filled).
func (g *Gate) Config() Config { return g.cfg }

// ServerOptions returns the gate's grpc.InTapHandle (a server has one) and
// the stats handler that gives each connection the context the tap needs
// to end a refused stream's context (see connctx.go). Give them after any
// other grpc.StatsHandler: the gate's must tag a connection last.
func (g *Gate) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.InTapHandle(g.tap), grpc.StatsHandler(connContexts{})}
}

// LimitOptions returns the server options of cfg's limits (zero fields:
// defaults): the stream and header-list limits, the server-wide receive
// limit (the larger of the two per-service ones) and grpcerr.DecodeOptions
// narrowing it per service (Limit). They replace grpcerr.DecodeOptions().
func LimitOptions(cfg Config) []grpc.ServerOption {
	cfg = cfg.withDefaults()
	return append([]grpc.ServerOption{
		grpc.MaxConcurrentStreams(uint32(cfg.MaxConcurrentStreams)),
		grpc.MaxHeaderListSize(MaxHeaderListBytes),
		grpc.MaxRecvMsgSize(max(cfg.MaxLinkMessageBytes, cfg.MaxRequestBytes)),
	}, grpcerr.DecodeOptions(cfg.Limit)...)
}

// Limit returns the largest encoded message the hub accepts as m: the
// link's (a LinkService ConnectRequest) MaxLinkMessageBytes, any other
// MaxRequestBytes (zero fields: defaults). For grpcerr.DecodeOptions.
func (c Config) Limit(m proto.Message) int {
	c = c.withDefaults()
	if _, ok := m.(*ironlinkv1.ConnectRequest); ok {
		return c.MaxLinkMessageBytes
	}
	return c.MaxRequestBytes
}

// Refused returns how many streams the tap refused, and how many
// connections it closed, since New.
func (g *Gate) Refused() (streams, conns int64) { return g.refused.Load(), g.closed.Load() }

// Unended returns how many refused streams' contexts the tap could not
// end since New (0 unless another stats handler tags connections after
// the gate's, or gRPC-Go changes how it makes stream contexts): each such
// context lives until its deadline, if it has one.
func (g *Gate) Unended() int64 { return g.unended.Load() }

// tap is the grpc.InTapHandle: see the package documentation.
func (g *Gate) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	cc, _ := ctx.Value(connCtxKey{}).(*connCtx)
	if g.authn == nil || public(info.FullMethodName) {
		if cc != nil {
			cc.seen()
		}
		return ctx, nil
	}
	c := g.conn(ctx)
	err := g.check(info.Header)
	if err == nil {
		if cc != nil {
			cc.seen()
		}
		if c != nil {
			c.refusedRun.Store(0)
		}
		return ctx, nil
	}
	g.refused.Add(1)
	// gRPC-Go never ends the context of a stream its tap refused: end it
	// here, or its deadline timer outlives the call (connctx.go).
	if cc == nil || !cc.refuse(ctx) {
		g.unended.Add(1)
	}
	var ve *auth.VerifyError
	msg := "token refused"
	if errors.As(err, &ve) {
		msg = ve.CallerMessage()
	}
	if c != nil && c.refusedRun.Add(1) == int64(g.cfg.MaxRefusedPerConn) {
		g.closed.Add(1)
		g.log.Warn("connection closed: too many unauthenticated requests in a row", "peer", c.remote, "refused", g.cfg.MaxRefusedPerConn, "last_check", err.Error())
		go c.Close() // not on the reader goroutine that runs the tap
	}
	return ctx, grpcerr.Unauthenticated(msg)
}

// check returns nil when md carries exactly one authentic bearer token.
func (g *Gate) check(md metadata.MD) error {
	vals := md.Get("authorization")
	if len(vals) != 1 {
		return &auth.VerifyError{Check: auth.CheckMissing, Detail: "send one authorization: Bearer <client assertion>"}
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return &auth.VerifyError{Check: auth.CheckMalformed, Detail: "authorization scheme must be Bearer"}
	}
	return g.authn(strings.TrimSpace(token))
}

// public reports whether method belongs to one of auth.PublicServices.
func public(method string) bool {
	svc, _, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	return ok && slices.Contains(auth.PublicServices, svc)
}

// conn returns the tracked connection ctx's stream arrived on (nil when the
// listener is not the gate's).
func (g *Gate) conn(ctx context.Context) *conn {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.conns[p.Addr.String()]
}

// Listener wraps l so that the gate can close a connection that collected
// MaxRefusedPerConn refusals in a row.
func (g *Gate) Listener(l net.Listener) net.Listener { return &listener{Listener: l, g: g} }

type listener struct {
	net.Listener
	g *Gate
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &conn{Conn: c, g: l.g, remote: c.RemoteAddr().String()}
	l.g.mu.Lock()
	l.g.conns[tc.remote] = tc
	l.g.mu.Unlock()
	return tc, nil
}

// conn is an accepted connection and its run of refused streams.
type conn struct {
	net.Conn
	g          *Gate
	remote     string
	refusedRun atomic.Int64
	once       sync.Once
}

// Close closes the connection once and forgets it.
func (c *conn) Close() error {
	var err error
	c.once.Do(func() {
		c.g.mu.Lock()
		if c.g.conns[c.remote] == c {
			delete(c.g.conns, c.remote)
		}
		c.g.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}

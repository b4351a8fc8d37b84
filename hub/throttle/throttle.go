package throttle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/auth"
)

// Defaults of the hub's --operator-rate, --operator-burst and
// --operator-max-streams.
const (
	// DefaultRate is the sustained calls per second one client may make.
	DefaultRate = 50
	// DefaultBurst is how many calls one client may make at once.
	DefaultBurst = 100
	// DefaultMaxStreams is how many streams one client may hold open.
	DefaultMaxStreams = 16
)

// ErrorInfo reasons (google.rpc.ErrorInfo.reason, domain grpcerr.Domain)
// of the refusals, stable for clients to match on.
const (
	// ReasonRateLimited: the client's calls came faster than its rate and
	// burst allow; RetryInfo says when the next one is allowed.
	ReasonRateLimited = grpcerr.ReasonRateLimited
	// ReasonTooManyStreams: the client already holds MaxStreams streams.
	ReasonTooManyStreams = grpcerr.ReasonTooManyStreams
)

// Config is the per-client limits. The zero Config limits nothing.
type Config struct {
	// Rate is the sustained operator calls per second each client may
	// make; 0 means no rate limit.
	Rate float64
	// Burst is how many calls a client may make at once before Rate
	// applies; at least 1 when Rate is set.
	Burst int
	// MaxStreams caps the streams one client holds open at once; 0 means
	// no cap.
	MaxStreams int
}

// DefaultConfig returns the hub's default limits.
func DefaultConfig() Config {
	return Config{Rate: DefaultRate, Burst: DefaultBurst, MaxStreams: DefaultMaxStreams}
}

// Validate reports every bad setting (errors.Join), each naming its flag.
func (c Config) Validate() error {
	var errs []error
	if c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) {
		errs = append(errs, fmt.Errorf("--operator-rate %v must be a number ≥ 0 (0: no rate limit)", c.Rate))
	}
	if c.Burst < 0 || (c.Rate > 0 && c.Burst < 1) {
		errs = append(errs, fmt.Errorf("--operator-burst %d must be ≥ 1 when --operator-rate is set", c.Burst))
	}
	if c.MaxStreams < 0 {
		errs = append(errs, fmt.Errorf("--operator-max-streams %d must be ≥ 0 (0: no cap)", c.MaxStreams))
	}
	return errors.Join(errs...)
}

// Limiter holds the per-client buckets and stream counts. It implements
// ratelimit.Limiter; use its interceptors. Safe for concurrent use.
type Limiter struct {
	cfg Config
	now func() time.Time

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	streams map[string]int
}

// New returns a Limiter for cfg. Errors: cfg.Validate's.
func New(cfg Config) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Limiter{cfg: cfg, now: time.Now, buckets: map[string]*rate.Limiter{}, streams: map[string]int{}}, nil
}

// LimitError is what Limit returns for a call over its client's rate.
type LimitError struct {
	// ClientID is the client whose bucket is empty.
	ClientID string
	// RetryAfter is how long until the bucket allows the next call.
	RetryAfter time.Duration
	// Rate and Burst are the client's limits.
	Rate  float64
	Burst int
}

// Error says who, what limit and when to retry.
func (e *LimitError) Error() string {
	return fmt.Sprintf("client %s is over its limit of %g calls/s (burst %d); retry in %s",
		e.ClientID, e.Rate, e.Burst, e.RetryAfter.Round(time.Millisecond))
}

// Limit implements ratelimit.Limiter: it takes one token from the bucket
// of ctx's client and returns nil, or, when the bucket is empty, takes
// nothing and returns a *LimitError saying when to retry.
func (l *Limiter) Limit(ctx context.Context) error {
	if l.cfg.Rate <= 0 {
		return nil
	}
	client := clientID(ctx)
	l.mu.Lock()
	b := l.buckets[client]
	if b == nil {
		b = rate.NewLimiter(rate.Limit(l.cfg.Rate), l.cfg.Burst)
		l.buckets[client] = b
	}
	l.mu.Unlock()
	now := l.now()
	r := b.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if r.OK() && d == 0 {
		return nil
	}
	r.CancelAt(now)
	e := &LimitError{ClientID: client, RetryAfter: d, Rate: l.cfg.Rate, Burst: l.cfg.Burst}
	if h, ok := ctx.Value(hintKey{}).(*hint); ok {
		h.err = e
	}
	return e
}

// UnaryInterceptor rate-limits the unary calls of every service but the
// exempt ones (see the package doc).
func (l *Limiter) UnaryInterceptor() grpc.UnaryServerInterceptor {
	limited := ratelimit.UnaryServerInterceptor(l)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if exempt(info.FullMethod) {
			return handler(ctx, req)
		}
		h := &hint{}
		resp, err := limited(context.WithValue(ctx, hintKey{}, h), req, info, handler)
		return resp, h.decorate(err)
	}
}

// StreamInterceptor rate-limits the opening of streams of every service but
// the exempt ones and caps how many each client holds open at once.
func (l *Limiter) StreamInterceptor() grpc.StreamServerInterceptor {
	limited := ratelimit.StreamServerInterceptor(l)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if exempt(info.FullMethod) {
			return handler(srv, ss)
		}
		client := clientID(ss.Context())
		if !l.acquire(client) {
			return tooManyStreams(client, l.cfg.MaxStreams)
		}
		defer l.release(client)
		h := &hint{}
		err := limited(srv, &hintStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), hintKey{}, h)}, info, handler)
		return h.decorate(err)
	}
}

// Streams returns how many streams client holds open (for tests and logs).
func (l *Limiter) Streams(client string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.streams[client]
}

func (l *Limiter) acquire(client string) bool {
	if l.cfg.MaxStreams <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.streams[client] >= l.cfg.MaxStreams {
		return false
	}
	l.streams[client]++
	return true
}

func (l *Limiter) release(client string) {
	if l.cfg.MaxStreams <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.streams[client]--; l.streams[client] <= 0 {
		delete(l.streams, client)
	}
}

// exempt is true for the link and the public services.
func exempt(fullMethod string) bool {
	return auth.IsPublicMethod(fullMethod) ||
		strings.HasPrefix(fullMethod, "/"+ironlinkv1.LinkService_ServiceDesc.ServiceName+"/")
}

// clientID names the caller's bucket: the authenticated client id, or
// "anonymous" when authentication is off.
func clientID(ctx context.Context) string {
	if id, ok := authn.FromContext(ctx); ok {
		return id.ClientID
	}
	return "anonymous"
}

// hint carries Limit's refusal out of ratelimit's interceptor, whose
// ResourceExhausted status keeps only the error's text: decorate puts the
// retry delay back on as a RetryInfo detail.
type hint struct{ err *LimitError }

type hintKey struct{}

// decorate returns err with RetryInfo and ErrorInfo details when it is
// the ResourceExhausted ratelimit made of h's refusal, else err unchanged.
func (h *hint) decorate(err error) error {
	if h.err == nil || status.Code(err) != codes.ResourceExhausted {
		return err
	}
	return grpcerr.RateLimited(h.err.Error(), h.err.RetryAfter)
}

func tooManyStreams(client string, n int) error {
	return grpcerr.TooManyStreams(client, n)
}

// hintStream is ss with a context carrying the hint.
type hintStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *hintStream) Context() context.Context { return s.ctx }

package link

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/operations/vault"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/loggate"
)

// Config tunes the link server.
type Config struct {
	// Replica names this hub process in the sites table and logs.
	Replica string
	// HeartbeatInterval is how often the hub sends a heartbeat on an idle link
	// (default 20 s, well under common 60 s load-balancer idle timeouts).
	HeartbeatInterval time.Duration
	// CommandSweep is how often each link checks for due commands without a
	// notification (default 5 s).
	CommandSweep time.Duration
	// Delivery says when unfinished commands go out again.
	Delivery store.DeliveryPolicy
	// HelloTimeout bounds the wait for the first message (default 30 s).
	HelloTimeout time.Duration
	// LastSeenFlush is how often the replica records its links' last-seen
	// times, all in one statement (RunLastSeenFlush; default 2 s). A site's
	// last_seen_at lags by at most this much, so stale_after must be larger.
	LastSeenFlush time.Duration
	// Hooks are told of link, batch and command events (metrics).
	Hooks Hooks
	// Operations says when operations go out (defaults: operations.go).
	Operations store.OperationDelivery
	// Vault holds ENROL credentials in memory (default: a new one for
	// Replica); the operation server of the process must share it.
	Vault *vault.Vault
	// Health, when set, commits the HealthReports satellites forward from
	// their local door, and Welcome advertises FeatureHealth (health.go).
	Health HealthReporter
}

// Defaults of Config. hub/app's Defaults table uses them (the values the
// flags show and app.Config.Validate fills); defaults fills them here too for
// a Config built without it (tests, embedded hubs), so each value is written
// once.
const (
	DefaultHeartbeatInterval = 20 * time.Second
	DefaultCommandSweep      = 5 * time.Second
	DefaultHelloTimeout      = 30 * time.Second
	// TakeoverWarnAge: a new link of a site that replaces another satellite
	// process's link younger than this is logged as a warning and counted
	// (Hooks.LinkTakeover); a restarted satellite replaces an older one.
	TakeoverWarnAge          = time.Minute
	DefaultLastSeenFlush     = 2 * time.Second
	DefaultResendAfter       = 30 * time.Second
	DefaultFailureBackoff    = 10 * time.Second
	DefaultMaxFailureBackoff = 5 * time.Minute
)

// defaultIfNotPositive sets *v to def when *v is zero or negative (unset).
func defaultIfNotPositive[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

func (c *Config) defaults() {
	defaultIfNotPositive(&c.HeartbeatInterval, DefaultHeartbeatInterval)
	defaultIfNotPositive(&c.CommandSweep, DefaultCommandSweep)
	defaultIfNotPositive(&c.Delivery.ResendAfter, DefaultResendAfter)
	defaultIfNotPositive(&c.Delivery.FailureBackoff, DefaultFailureBackoff)
	defaultIfNotPositive(&c.Delivery.MaxFailureBackoff, DefaultMaxFailureBackoff)
	defaultIfNotPositive(&c.HelloTimeout, DefaultHelloTimeout)
	c.operationDefaults()
	defaultIfNotPositive(&c.LastSeenFlush, DefaultLastSeenFlush)
}

// Server implements ironlinkv1.LinkServiceServer.
type Server struct {
	ironlinkv1.UnimplementedLinkServiceServer
	store Store
	cfg   Config
	log   *slog.Logger

	mu       sync.Mutex
	links    map[string]*conn
	draining bool

	// seen is the links' last-seen times not yet flushed (liveness.go).
	seen lastSeen
	// due caches the sites with due commands for the sweeps (wake.go).
	due dueSites
	// shares counts the links with writes in the group committer (fair.go).
	shares writeShares
	// dbFailedLog lets a link write's database failure (Unavailable) be
	// logged at Error once a minute for all links (linkLoop.refused);
	// sweepFailedLog a failed read of due commands at Warn
	// (warnSweepFailed); closeFailedLog a failed record of a link's close
	// at Warn. The others go at Debug.
	dbFailedLog, sweepFailedLog, closeFailedLog *loggate.Gate
}

// NewServer returns a link server over st.
func NewServer(st Store, cfg Config, log *slog.Logger) *Server {
	cfg.defaults()
	return &Server{store: st, cfg: cfg, log: log, links: map[string]*conn{},
		dbFailedLog: loggate.New(), sweepFailedLog: loggate.New(), closeFailedLog: loggate.New()}
}

// Connect serves one satellite link until it ends. The protocol, in order:
//
//  1. Hello: the satellite's first message, within Config.HelloTimeout and
//     valid (checkHello), for the site the authenticated client is bound to;
//     applied generations naming another site's devices are PermissionDenied.
//     Nothing is recorded before the hello passes.
//  2. Resume point: the link is recorded under a new fencing epoch (any
//     older link of the site can no longer write) and Welcome tells the
//     satellite the last batch sequence committed and by which boot, so it
//     resends what is missing or sends a full snapshot.
//  3. Desired states: every device of the site that has one, for the
//     satellite's resync.
//  4. The link's loop (loop.go) until the link ends: batches committed in
//     order and acked, site conditions replaced, due commands delivered (SENT
//     ones once again at link start), results, drift corrections and
//     heartbeats recorded — every write off the loop, which alone sends.
//
// The link ends with Aborted when a newer link of the site supersedes it,
// Unavailable when this replica drains, Unauthenticated when the roster
// drops the client, and the status of the first refused message otherwise.
func (s *Server) Connect(stream ironlinkv1.LinkService_ConnectServer) (err error) {
	if s.isDraining() {
		return grpcerr.ReplicaDraining()
	}
	hello, applied, err := s.recvHello(stream)
	if err != nil {
		return err
	}
	site := hello.GetSite()
	log := s.log.With("site", site, "boot_id", truncate(hello.GetBootId(), MaxHelloTextBytes))
	var (
		id   *auth.Identity
		sess store.LinkSession
	)
	onOwnStack(func() {
		if id, log, err = s.authorizeHello(stream.Context(), site, applied, log); err != nil {
			return
		}
		sess, err = s.store.OpenLink(stream.Context(), store.LinkHello{
			Site: site, BootID: hello.GetBootId(), Version: hello.GetVersion(),
			Capabilities: hello.GetCapabilities(), Replica: s.cfg.Replica,
		})
		if err != nil {
			err = storeFailed(log, "open link", err)
		}
	})
	if err != nil {
		return err
	}
	if r := sess.Replaced; r.Open && r.BootID != hello.GetBootId() && r.Age < TakeoverWarnAge {
		log.Warn("link taken over from another satellite process whose link was open only briefly: is a second satellite running for this site with the same key? Each takeover costs a snapshot",
			"replaced_boot_id", truncate(r.BootID, MaxHelloTextBytes), "replaced_replica", r.Replica, "replaced_link_age", r.Age.Round(time.Millisecond))
		s.cfg.Hooks.takeover(site)
	}
	ctx, cancel := context.WithCancelCause(stream.Context())
	defer cancel(nil)
	c := &conn{site: site, epoch: sess.Epoch, id: id, wake: make(chan struct{}, 1), cancel: cancel}
	if !s.register(c) {
		return grpcerr.ReplicaDraining()
	}
	defer func() {
		s.unregister(c)
		closeCtx, done := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer done()
		if err := s.store.CloseLink(closeCtx, site, sess.Epoch); err != nil {
			// The next link's OpenLink overwrites what this would have
			// written; in an outage every link fails here at once.
			s.closeFailedLog.Log(closeCtx, log, slog.LevelWarn, "close link", "err", err)
		}
	}()
	log.Info("link opened", "epoch", sess.Epoch, "last_sequence", sess.LastSequence, "version", hello.GetVersion())
	s.cfg.Hooks.opened(site)
	defer func() { s.cfg.Hooks.ended(site, ctx, err) }()

	l := &linkLoop{s: s, stream: stream, site: site, epoch: sess.Epoch, id: id, log: log,
		ops: slices.Contains(hello.GetCapabilities(), operations.Capability)}
	onOwnStack(func() {
		if err = stream.Send(&ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Welcome{Welcome: &ironlinkv1.Welcome{
			LastCommittedSequence:    sess.LastSequence,
			Epoch:                    sess.Epoch,
			HeartbeatIntervalSeconds: int32(s.cfg.HeartbeatInterval / time.Second),
			Replica:                  s.cfg.Replica,
			LastCommittedBootId:      sess.LastSequenceBootID,
			Features:                 s.features(),
		}}}); err != nil {
			return
		}
		var desired *ironlinkv1.ConnectResponse
		if desired, err = l.desiredStates(ctx); err != nil {
			return
		}
		err = stream.Send(desired)
	})
	if err != nil {
		return err
	}
	return l.run(ctx, c.wake)
}

// onOwnStack runs f on a goroutine of its own and waits for it; a panic in
// f is raised again on the caller's goroutine (where the recovery
// interceptor catches it). A link's handler goroutine lives as long as the
// link: the deep call chains of its setup (pgx queries, encoding the
// desired states) would grow its stack to 16–32 KiB, which the runtime
// shrinks only by half per garbage collection and only while the
// goroutine uses under a quarter of it, so idle links kept it. Run here,
// that stack is freed when the setup returns.
func onOwnStack(f func()) {
	done := make(chan struct{})
	var p any
	go func() {
		defer func() {
			p = recover()
			close(done)
		}()
		f()
	}()
	<-done
	if p != nil {
		panic(p)
	}
}

// recvHello waits up to Config.HelloTimeout for the link's first message,
// which must be a valid Hello (checkHello). It returns the hello and the
// device ids of its applied generations.
func (s *Server) recvHello(stream ironlinkv1.LinkService_ConnectServer) (*ironlinkv1.Hello, []string, error) {
	type result struct {
		m   *ironlinkv1.ConnectRequest
		err error
	}
	ch := make(chan result, 1)
	go func() {
		m, err := stream.Recv()
		ch <- result{m, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-time.After(s.cfg.HelloTimeout):
		return nil, nil, grpcerr.HelloTimeout()
	}
	if r.err != nil {
		return nil, nil, r.err
	}
	h := r.m.GetHello()
	if h == nil {
		return nil, nil, grpcerr.InvalidArgument("hello", grpcerr.ReasonRequired, "the first message of a link must be a hello")
	}
	applied, err := checkHello(h)
	if err != nil {
		return nil, nil, err
	}
	return h, applied, nil
}

// authorizeHello checks a hello against the authenticated client (none
// without authentication): the client must be the site's satellite, and the
// devices of its applied generations must not be another site's. It returns
// the identity and log with the client id added.
func (s *Server) authorizeHello(ctx context.Context, site string, applied []string, log *slog.Logger) (*auth.Identity, *slog.Logger, error) {
	var id *auth.Identity
	if ident, ok := authn.FromContext(ctx); ok {
		if ident.Site != site {
			log.Warn("hello refused: site is not the client's", "client_id", ident.ClientID, "client_site", ident.Site)
			return nil, nil, grpcerr.PermissionDenied(grpcerr.ReasonWrongSite, fmt.Sprintf("client %s may only link site %q, not %q", ident.ClientID, ident.Site, site))
		}
		id = &ident
		log = log.With("client_id", ident.ClientID)
	}
	dev, other, foreign, err := s.store.ForeignDevice(ctx, site, applied)
	switch {
	case err != nil:
		return nil, nil, storeFailed(log, "check applied generations", err)
	case foreign:
		log.Warn("hello refused: applied generation for a device of another site", "device_id", dev, "device_site", other)
		return nil, nil, grpcerr.PermissionDenied(grpcerr.ReasonWrongSite, fmt.Sprintf("hello: device %s of applied_generations belongs to another site", dev))
	}
	return id, log, nil
}

// storeFailed logs a failed store call of a link's hello and returns its
// gRPC error: at error level, except a database that does not answer
// (Unavailable), logged at debug level because every satellite retrying
// would log it again and again during an outage that readiness already
// logs once (health.Checker).
func storeFailed(log *slog.Logger, what string, err error) error {
	st := grpcerr.FromStore(err)
	if status.Code(st) == codes.Unavailable {
		log.Debug(what, "err", err)
	} else {
		log.Error(what, "err", err)
	}
	return st
}

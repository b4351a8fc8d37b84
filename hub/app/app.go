// Package app wires the hub together: configuration, migrations, the store,
// the gRPC server (link + fleet services, health, reflection, logging,
// panic-recovery, authentication and per-client operator limit
// interceptors) and the background loops (command
// notifications, stale-site sweep). cmd/ironlink-hub only parses flags and
// calls Run.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/link"
	"github.com/ironlink/ironlink/hub/operations/vault"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/throttle"
	"github.com/ironlink/ironlink/hub/web"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/logkey"
	"github.com/ironlink/ironlink/internal/telemetry"
	"github.com/ironlink/ironlink/internal/textcheck"
	"github.com/ironlink/ironlink/internal/tlsutil"
)

// Config is the hub's runtime configuration (see docs/reference/ironlink-hub.md).
type Config struct {
	// Listen is the gRPC listen address, host:port (default localhost:7070).
	Listen string
	// DatabaseURL is the PostgreSQL URL.
	DatabaseURL string
	// Replica names this process (default hostname-pid).
	Replica string
	// StaleAfter: a site silent this long is UNREACHABLE (default 3 m = 3 poll intervals).
	StaleAfter time.Duration
	// Link tunes the link server.
	Link link.Config
	// History partitions condition_history and status_history by time and
	// drops whole partitions older than History.Retention (0 = keep
	// forever); flags --history-retention and --history-partition-interval,
	// Ahead has no flag (default 4) (docs/design/architecture.md "History partitions and retention").
	History store.PartitionPolicy
	// Keepalive: the server pings an idle connection after KeepaliveTime and
	// drops it when no answer comes within KeepaliveTimeout; clients may ping
	// at most every KeepaliveMinTime (must be ≤ the satellite's keepalive time).
	KeepaliveTime, KeepaliveTimeout, KeepaliveMinTime time.Duration
	// RosterPath is the YAML roster of clients (satellites and operators);
	// required unless NoAuth. Reloaded on SIGHUP and on change.
	RosterPath string
	// NoAuth turns client authentication off (local development only).
	NoAuth bool
	// Audience is the JWT "aud" clients must address (default "ironlink-hub").
	Audience string
	// MaxTokenLifetime refuses client assertions living longer (default 5 m).
	MaxTokenLifetime time.Duration
	// TLSCert, TLSKey are the server certificate and key files (PEM),
	// reloaded when they change; required unless Plaintext.
	TLSCert, TLSKey string
	// TLSClientCA, when set, requires client certificates signed by it
	// (mutual TLS), bound to the authenticated client id.
	TLSClientCA string
	// Plaintext serves without TLS (local development only).
	Plaintext bool
	// ShutdownGrace bounds graceful shutdown before connections are cut.
	ShutdownGrace time.Duration
	// MaxConnectionAge: connections older than this are asked to reconnect
	// (GOAWAY) so satellites spread over replicas; MaxConnectionAgeGrace then
	// bounds how long open streams may continue (defaults 30 m and 1 m; 0 = off).
	MaxConnectionAge, MaxConnectionAgeGrace time.Duration
	// Web is the fleet view (hub/web), off unless Web.Addr is set; it
	// authenticates against the roster even with NoAuth, and serves with
	// TLSCert/TLSKey unless Plaintext.
	Web web.Config
	// Throttle is the per-client rate limit and stream cap of the operator
	// API (the link is exempt); the zero value limits nothing, the flags
	// default to throttle.DefaultConfig.
	Throttle throttle.Config
	// AdminAddr is the plaintext HTTP listener for /metrics, /healthz and
	// /readyz (host:port; "" = none). The command's default is DefaultAdminAddr.
	AdminAddr string
	// CommandPoolConns sizes the command path's own database pool
	// (quarantine, release, retry, command delivery and results; default
	// 4), apart from the main pool that condition ingest can keep busy.
	CommandPoolConns int32
	// SkipMigrate starts serving without applying migrations (they run in
	// `ironlink-hub migrate`, e.g. a Helm hook Job); the replica is not ready
	// while the schema is behind this binary.
	SkipMigrate bool
	// PolicyFile is the quarantine policy (hub/policy: the chart values'
	// `policy` key); "" = automatic quarantine off. Reloaded on SIGHUP and on
	// change; the last good file stays in force.
	PolicyFile string
	// PolicyInterval is how often the policy evaluator runs on the replica
	// holding its advisory lock (default 1 s).
	PolicyInterval time.Duration
	// EnrolKeyFile holds the key(s) that seal ENROL BMC credentials into
	// PostgreSQL (hub/operations/vault.LoadSealer: 32 bytes each, base64,
	// one per line, the first sealing; the same file on every replica); ""
	// keeps them in the memory of the replica that took the request, which
	// serves one replica only.
	EnrolKeyFile string
}

// Validate checks c and returns it with every unset setting filled from
// [Defaults] (the only place defaults live; the flags show the same
// values). c itself is not changed: the returned Config is the one passed
// down, by value, to everything Run builds. Every problem is reported
// (errors.Join), each naming the flag and environment variable to fix.
// MaxConnectionAge is the one duration whose zero is kept (0 = never).
func (c Config) Validate() (Config, error) {
	d := Defaults()
	var errs []error
	fill(&c.Listen, d.Listen)
	fill(&c.Audience, d.Audience)
	fill(&c.MaxTokenLifetime, d.MaxTokenLifetime)
	fill(&c.StaleAfter, d.StaleAfter)
	fill(&c.KeepaliveTime, d.KeepaliveTime)
	fill(&c.KeepaliveTimeout, d.KeepaliveTimeout)
	fill(&c.KeepaliveMinTime, d.KeepaliveMinTime)
	fill(&c.MaxConnectionAgeGrace, d.MaxConnectionAgeGrace)
	fill(&c.ShutdownGrace, d.ShutdownGrace)
	fill(&c.Link.HeartbeatInterval, d.Link.HeartbeatInterval)
	fill(&c.Link.CommandSweep, d.Link.CommandSweep)
	fill(&c.Link.Delivery.ResendAfter, d.Link.Delivery.ResendAfter)
	fill(&c.Link.Delivery.FailureBackoff, d.Link.Delivery.FailureBackoff)
	fill(&c.Link.Delivery.MaxFailureBackoff, d.Link.Delivery.MaxFailureBackoff)
	fill(&c.Link.HelloTimeout, d.Link.HelloTimeout)
	fill(&c.Link.Operations.PerSiteLimit, d.Link.Operations.PerSiteLimit)
	fill(&c.Link.Operations.ResendAfter, d.Link.Operations.ResendAfter)
	fill(&c.Link.Operations.MaxResendAfter, d.Link.Operations.MaxResendAfter)
	fill(&c.PolicyInterval, d.PolicyInterval)
	fill(&c.History.Interval, d.History.Interval)
	fill(&c.History.Ahead, d.History.Ahead)
	if c.History.Interval < time.Hour || c.History.Ahead < 1 || c.History.Retention < 0 {
		errs = append(errs, fmt.Errorf("history partitions: interval %s must be at least 1h, ahead %d at least 1, retention %s not negative (--history-partition-interval, --history-retention)",
			c.History.Interval, c.History.Ahead, c.History.Retention))
	}
	fill(&c.Link.LastSeenFlush, d.Link.LastSeenFlush)
	fill(&c.CommandPoolConns, d.CommandPoolConns)
	if c.DatabaseURL == "" {
		errs = append(errs, errors.New("database URL is required (--database-url or DATABASE_URL)"))
	}
	if c.RosterPath == "" && !c.NoAuth {
		errs = append(errs, errors.New("a client roster is required (--roster or IRONLINK_HUB_ROSTER); --no-auth turns authentication off for local development"))
	}
	if (c.TLSCert == "" || c.TLSKey == "") && !c.Plaintext {
		errs = append(errs, errors.New("a TLS certificate and key are required (--tls-cert, --tls-key); --plaintext serves without TLS for local development"))
	}
	if c.StaleAfter < time.Second {
		errs = append(errs, fmt.Errorf("stale-after %s is below 1s", c.StaleAfter))
	}
	if c.Link.LastSeenFlush > 0 && c.StaleAfter <= c.Link.LastSeenFlush {
		errs = append(errs, fmt.Errorf("stale-after %s must be larger than the last-seen flush interval %s (--last-seen-flush): a live site's last_seen_at lags by up to that much", c.StaleAfter, c.Link.LastSeenFlush))
	}
	if c.CommandPoolConns < 0 {
		errs = append(errs, fmt.Errorf("--command-pool-conns %d is negative", c.CommandPoolConns))
	}
	if c.KeepaliveMinTime > c.KeepaliveTime {
		errs = append(errs, fmt.Errorf("keepalive min time %s is above the keepalive time %s", c.KeepaliveMinTime, c.KeepaliveTime))
	}
	for _, n := range []struct {
		name string
		d    time.Duration
	}{
		{"--max-token-lifetime", c.MaxTokenLifetime}, {"--heartbeat-interval", c.Link.HeartbeatInterval},
		{"--command-sweep", c.Link.CommandSweep}, {"--command-resend-after", c.Link.Delivery.ResendAfter},
		{"--command-failure-backoff", c.Link.Delivery.FailureBackoff}, {"--max-connection-age", c.MaxConnectionAge},
		{"--keepalive-time", c.KeepaliveTime}, {"--keepalive-timeout", c.KeepaliveTimeout},
		{"--last-seen-flush", c.Link.LastSeenFlush},
	} {
		if n.d < 0 {
			errs = append(errs, fmt.Errorf("%s %s is negative", n.name, n.d))
		}
	}
	c.Link.Replica = c.Replica
	if c.Web.Addr != "" {
		if c.RosterPath == "" {
			errs = append(errs, errors.New("the fleet view (--web-addr) needs a roster (--roster): it never serves without authentication"))
		}
		c.Web.TLSCert, c.Web.TLSKey, c.Web.Plaintext = c.TLSCert, c.TLSKey, c.Plaintext
		if err := c.Web.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return c, errors.Join(errs...)
}

// Run migrates the database, serves until ctx ends, then shuts down
// gracefully. It returns the first fatal error.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	cfg, err := cfg.Validate()
	if err != nil {
		return err
	}
	if !cfg.SkipMigrate {
		applied, err := store.Migrate(ctx, cfg.DatabaseURL)
		if err != nil {
			return err
		}
		if len(applied) > 0 {
			log.Info("migrations applied", "versions", applied)
		}
	}
	log = slog.New(telemetry.LogHandler(log.Handler())) // trace ids in log lines
	obs, err := newObservability(cfg, log)
	if err != nil {
		return err
	}
	defer obs.close()
	raiseOpenFileLimit(log)
	st, err := store.Open(ctx, cfg.DatabaseURL, log, obs.storeOptions()...)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.OpenCommandPool(ctx, cfg.CommandPoolConns, obs.storeOptions()...); err != nil {
		return err
	}

	opts := obs.serverOptions()
	cfg.Link.Hooks = obs.linkHooks()
	if !cfg.Plaintext {
		tc, err := tlsutil.ServerConfig(cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA)
		if err != nil {
			return fmt.Errorf("TLS: %w", err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	} else {
		log.Warn("serving WITHOUT TLS (--plaintext): local development only")
	}
	if cfg.EnrolKeyFile != "" {
		sl, err := vault.LoadSealer(cfg.EnrolKeyFile)
		if err != nil {
			return fmt.Errorf("--enrol-key-file: %w", err)
		}
		cfg.Link.Vault = vault.New(cfg.Replica, 0).WithSealer(sl)
		log.Info("ENROL credentials are sealed into the database", "key_id", sl.KeyID(), "key_ids", sl.KeyIDs())
	} else {
		log.Info("ENROL credentials stay in this replica's memory (no --enrol-key-file): with several replicas, an enrolment waits for the replica that took it")
	}
	linkSrv := link.NewServer(st, cfg.Link, log.With("component", "link"))
	var watcher *auth.RosterWatcher
	if !cfg.NoAuth {
		watcher, err = auth.NewRosterWatcher(cfg.RosterPath, log.With("component", "roster"), func(_, new *auth.Roster) {
			linkSrv.RevokeUnauthorized(new)
			obs.rosterReloaded()
		})
		if err != nil {
			return fmt.Errorf("roster: %w", err)
		}
		v := &auth.Verifier{Roster: watcher.Roster, Audience: cfg.Audience, MaxLifetime: cfg.MaxTokenLifetime, Replay: obs.replay(st)}
		opts = append(opts, AuthOptions(v, log)...)
		log.Info("client authentication on", "roster", cfg.RosterPath, "clients", len(watcher.Roster().Clients()), "audience", cfg.Audience)
	} else {
		log.Warn("client authentication OFF (--no-auth): anyone who reaches the hub can report and quarantine; local development only")
	}
	// After authentication, so each client has its own bucket.
	lim, err := throttle.New(cfg.Throttle)
	if err != nil {
		return fmt.Errorf("operator limits: %w", err)
	}
	opts = append(opts, grpc.ChainUnaryInterceptor(lim.UnaryInterceptor()), grpc.ChainStreamInterceptor(lim.StreamInterceptor()))
	pol, err := newPolicy(cfg, st, obs, log)
	if err != nil {
		return err
	}
	opts = append(opts, grpc.ChainUnaryInterceptor(pol.api.FleetDecorator()))
	fleetSrv := NewFleetServer(st, log.With("component", "fleet"))
	var webSrv *web.Server
	if cfg.Web.Addr != "" {
		if watcher == nil { // --no-auth: the fleet view still authenticates against the roster
			if watcher, err = auth.NewRosterWatcher(cfg.RosterPath, log.With("component", "roster"), nil); err != nil {
				return fmt.Errorf("roster: %w", err)
			}
		}
		if webSrv, err = web.New(cfg.Web, fleetSrv, st, watcher.Roster, log.With("component", "web")); err != nil {
			return err
		}
	}
	srv := NewGRPCServer(cfg, log, opts...)
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	hs := RegisterServices(srv, linkSrv, fleetSrv)
	opsSrv := NewOperationServer(st, linkSrv, log.With("component", "operations"))
	RegisterOperations(srv, hs, opsSrv)
	pol.register(srv, hs)
	obs.start(ctx, st, srv, hs, []string{"", ironlinkv1.LinkService_ServiceDesc.ServiceName, ironlinkv1.FleetService_ServiceDesc.ServiceName,
		ironlinkv1.OperationService_ServiceDesc.ServiceName, ironlinkv1.PolicyService_ServiceDesc.ServiceName}, linkSrv, watcher)

	log.Info("hub serving", "listen", lis.Addr().String(), logkey.Replica, cfg.Replica)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return linkSrv.ListenForCommands(gctx, cfg.DatabaseURL) })
	g.Go(func() error {
		return opsSrv.Changes().Listen(gctx, cfg.DatabaseURL, func(err error) { log.Warn("operation listener", "err", err) })
	})
	g.Go(func() error { linkSrv.RunStaleSweep(gctx, cfg.StaleAfter); return nil })
	g.Go(func() error { st.RunHistoryPartitions(gctx, cfg.History, time.Hour); return nil })
	g.Go(func() error { linkSrv.RunLastSeenFlush(gctx, cfg.Link.LastSeenFlush); return nil })
	g.Go(func() error { return obs.run(gctx) })
	g.Go(func() error { return pol.run(gctx) })
	if watcher != nil {
		g.Go(func() error { return watcher.Run(gctx) })
		g.Go(func() error { st.RunJTIPurge(gctx, time.Minute); return nil })
	}
	if webSrv != nil {
		g.Go(func() error { return webSrv.Run(gctx) })
	}
	g.Go(func() error {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("serve: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		log.Info("hub shutting down: draining links", "links", linkSrv.Links())
		obs.drain()
		hs.Shutdown()
		linkSrv.Drain()
		done := make(chan struct{})
		go func() { srv.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-time.After(cfg.ShutdownGrace):
			srv.Stop()
		}
		return nil
	})
	return g.Wait()
}

// actorFromContext names the authenticated client, or "anonymous" without authentication.
func actorFromContext(ctx context.Context) string {
	if id, ok := authn.FromContext(ctx); ok {
		return id.ClientID
	}
	return "anonymous"
}

// maxLoggedValue caps each value of the per-RPC log line (bytes).
const maxLoggedValue = 2048

// NewGRPCServer builds the hub's gRPC server with keepalive enforcement and
// the logging and panic-recovery interceptors (go-grpc-middleware v2) on
// unary and stream calls, then grpcerr.DecodeOptions (a request that cannot
// be decoded is InvalidArgument naming the field, not Internal), followed by
// whatever extra (e.g. authentication) interceptors and credentials opts carry.
func NewGRPCServer(cfg Config, log *slog.Logger, opts ...grpc.ServerOption) *grpc.Server {
	logger := logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		for i := 1; i < len(fields); i += 2 { // grpc.error can carry a client's input: log a prefix
			if v, ok := fields[i].(string); ok {
				fields[i] = textcheck.Prefix(v, maxLoggedValue)
			}
		}
		log.Log(ctx, slog.Level(lvl), msg, fields...)
	})
	logOpts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall)}
	recoverOpts := []recovery.Option{recovery.WithRecoveryHandler(func(p any) error {
		log.Error("panic in handler", "panic", p)
		return grpcerr.Internal("internal error")
	})}
	return grpc.NewServer(append([]grpc.ServerOption{
		grpc.ChainUnaryInterceptor(logging.UnaryServerInterceptor(logger, logOpts...), recovery.UnaryServerInterceptor(recoverOpts...)),
		grpc.ChainStreamInterceptor(logging.StreamServerInterceptor(logger, logOpts...), recovery.StreamServerInterceptor(recoverOpts...)),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: cfg.KeepaliveTime, Timeout: cfg.KeepaliveTimeout,
			MaxConnectionAge: cfg.MaxConnectionAge, MaxConnectionAgeGrace: cfg.MaxConnectionAgeGrace}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: cfg.KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.MaxRecvMsgSize(16 << 20),
	}, append(append(linkTransportOptions(), grpcerr.DecodeOptions()...), opts...)...)...)
}

// Package app wires the hub together: configuration, migrations, the store,
// the gRPC server (link + fleet services, health, reflection, logging,
// panic-recovery, authentication and per-client operator limit
// interceptors) and the background loops (command
// notifications, stale-site sweep). cmd/ironlink-hub only fills an
// [Options] from its flags and environment, validates it into a [Config]
// and calls [Run]; config.go holds the three.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/keepalive"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/admission"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/fleet"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/labelsfile"
	"github.com/ironlink/ironlink/hub/link"
	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/operations/vault"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/store/partitions"
	"github.com/ironlink/ironlink/hub/throttle"
	"github.com/ironlink/ironlink/hub/web"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/logkey"
	"github.com/ironlink/ironlink/internal/telemetry"
	"github.com/ironlink/ironlink/internal/textcheck"
	"github.com/ironlink/ironlink/internal/tlsutil"
)

// errNotValidated is Run's answer to a Config not made by Options.Validate.
var errNotValidated = errors.New("app: the Config was not made by Options.Validate (or it reported an error)")

// Run migrates the database (unless SkipMigrate), serves until ctx ends,
// then shuts down gracefully. While PostgreSQL does not answer at start it
// waits for it (dbwait.go). It returns the first fatal error. cfg must
// come from a successful [Options.Validate].
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if !cfg.valid {
		return errNotValidated
	}
	if err := retryDatabase(ctx, log, "migrate", func() error {
		if err := pingDatabase(ctx, cfg.DatabaseURL); err != nil {
			return err
		}
		return migrate(ctx, cfg, log)
	}); err != nil {
		return err
	}
	log = slog.New(telemetry.LogHandler(log.Handler())) // trace ids in log lines
	obs, err := newObservability(cfg, log)
	if err != nil {
		return err
	}
	defer obs.close()
	raiseOpenFileLimit(log)
	setMemoryLimit(log, memlimit.FromCgroup)
	var st *store.Store
	if err := retryDatabase(ctx, log, "open", func() (err error) {
		st, err = openStore(ctx, cfg, obs, log)
		return err
	}); err != nil {
		return err
	}
	defer st.Close()
	h, err := buildHub(cfg, st, obs, log)
	if err != nil {
		return err
	}
	return h.serve(ctx)
}

// migrate applies pending migrations unless cfg.SkipMigrate.
func migrate(ctx context.Context, cfg Config, log *slog.Logger) error {
	if cfg.SkipMigrate {
		return nil
	}
	applied, err := store.Migrate(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	if len(applied) > 0 {
		log.Info("migrations applied", "versions", applied)
	}
	return nil
}

// openStore opens the store's main pool and the command path's own pool.
func openStore(ctx context.Context, cfg Config, obs *observability, log *slog.Logger) (*store.Store, error) {
	st, err := store.Open(ctx, cfg.DatabaseURL, log, obs.storeOptions()...)
	if err != nil {
		return nil, err
	}
	if err := st.OpenCommandPool(ctx, cfg.CommandPoolConns, obs.storeOptions()...); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// hub is one replica's services, built and not yet serving.
type hub struct {
	cfg      Config
	log      *slog.Logger
	st       *store.Store
	obs      *observability
	linkSrv  *link.Server
	opsSrv   *operations.Server
	pol      *hubPolicy
	profiles *hubProfiles
	labels   *labelsfile.Keeper // nil without --labels-file
	// templates is the --nova-templates-file (hub/novatemplate).
	templates *hubNovaTemplates
	watcher   *auth.RosterWatcher // nil with NoAuth and no fleet view
	gate      *admission.Gate     // refuses unauthenticated streams before their body is read; nil with NoAuth
	streams   *authn.Streams      // open operator streams, re-checked on roster reload; nil with NoAuth
	webSrv    *web.Server         // nil without a fleet view
	srv       *grpc.Server
	health    *health.Server
	services  []string // the health service names, "" for the whole server
}

// buildHub builds the services over st: the link server, authentication,
// the operator limits, policy, the fleet and operation APIs, the fleet
// view, and the gRPC server that carries them (registered, not serving).
func buildHub(cfg Config, st *store.Store, obs *observability, log *slog.Logger) (*hub, error) {
	h := &hub{cfg: cfg, log: log, st: st, obs: obs}
	opts, err := transportCredentials(cfg, log)
	if err != nil {
		return nil, err
	}
	opts = append(obs.serverOptions(), opts...)
	linkCfg, err := linkConfig(cfg, obs, log)
	if err != nil {
		return nil, err
	}
	healthSrv := NewHealthServer(st, cfg, log.With("component", "health"), obs.metrics.HealthClamped)
	linkCfg.Health = healthSrv // satellites forward their local door's reports
	h.linkSrv = link.NewServer(st, linkCfg, log.With("component", "link"))
	authOpts, err := h.authenticate()
	if err != nil {
		return nil, err
	}
	opts = append(opts, authOpts...)
	// After authentication, so each client has its own bucket.
	lim, err := throttle.New(cfg.Throttle)
	if err != nil {
		return nil, fmt.Errorf("operator limits: %w", err)
	}
	opts = append(opts, grpc.ChainUnaryInterceptor(lim.UnaryInterceptor()), grpc.ChainStreamInterceptor(lim.StreamInterceptor()))
	if h.templates, err = newNovaTemplates(cfg, log); err != nil {
		return nil, err
	}
	if h.pol, err = newPolicy(cfg, st, obs, h.templates.current, log); err != nil {
		return nil, err
	}
	opts = append(opts, grpc.ChainUnaryInterceptor(h.pol.api.FleetDecorator()))
	fleetSrv := NewFleetServer(st, log.With("component", "fleet"))
	fleetSrv.SetWatchSendTimeout(cfg.WatchSendTimeout)
	if h.profiles, err = newProfiles(cfg, st, fleetSrv, log); err != nil {
		return nil, err
	}
	if cfg.LabelsFile != "" {
		if h.labels, err = labelsfile.New(cfg.LabelsFile, st, log.With("component", "labels")); err != nil {
			return nil, fmt.Errorf("labels: %w", err)
		}
		h.labels.SetCappedGauge(obs.metrics.SetDevicesLabelsCapped)
	}
	if err := h.fleetView(fleetSrv); err != nil {
		return nil, err
	}
	h.srv = NewGRPCServer(cfg, log, opts...)
	h.health = RegisterServices(h.srv, h.linkSrv, fleetSrv)
	h.opsSrv = NewOperationServer(st, h.linkSrv, log.With("component", "operations"))
	h.opsSrv.SetNovaTemplates(h.templates.current)
	h.opsSrv.SetValidationCleanSteps(h.profiles.validationCleanSteps)
	if h.webSrv != nil {
		h.webSrv.SetOperations(h.opsSrv)
		h.webSrv.SetPolicy(h.pol.api)
		h.webSrv.SetRemediation(h.pol.rem)
	}
	RegisterOperations(h.srv, h.health, h.opsSrv)
	RegisterHealth(h.srv, h.health, healthSrv)
	healthSrv.SetValidationWake(h.profiles.validation.Wake)
	RegisterValidation(h.srv, h.health, st, h.profiles.validation.Wake, log.With("component", "validation"))
	h.pol.register(h.srv, h.health)
	h.services = []string{"", ironlinkv1.LinkService_ServiceDesc.ServiceName, ironlinkv1.FleetService_ServiceDesc.ServiceName,
		ironlinkv1.OperationService_ServiceDesc.ServiceName, ironlinkv1.PolicyService_ServiceDesc.ServiceName,
		ironlinkv1.HealthService_ServiceDesc.ServiceName, ironlinkv1.HardwareService_ServiceDesc.ServiceName,
		ironlinkv1.ValidationService_ServiceDesc.ServiceName}
	return h, nil
}

// transportCredentials returns the server's TLS credentials, or none (and a
// warning) with Plaintext.
func transportCredentials(cfg Config, log *slog.Logger) ([]grpc.ServerOption, error) {
	if cfg.Plaintext {
		log.Warn("serving WITHOUT TLS (--plaintext): local development only")
		return nil, nil
	}
	tc, err := tlsutil.ServerConfig(cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA)
	if err != nil {
		return nil, fmt.Errorf("TLS: %w", err)
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(tc))}, nil
}

// linkConfig returns a copy of cfg.Link with the metrics hooks and the
// ENROL credential vault (sealing into the database with EnrolKeyFile).
func linkConfig(cfg Config, obs *observability, log *slog.Logger) (link.Config, error) {
	lc := cfg.Link
	lc.Hooks = obs.linkHooks()
	if cfg.EnrolKeyFile == "" {
		log.Info("ENROL credentials stay in this replica's memory (no --enrol-key-file): with several replicas, an enrolment waits for the replica that took it")
		return lc, nil
	}
	sl, err := vault.LoadSealer(cfg.EnrolKeyFile)
	if err != nil {
		return lc, fmt.Errorf("--enrol-key-file: %w", err)
	}
	lc.Vault = vault.New(cfg.Replica, 0).WithSealer(sl)
	log.Info("ENROL credentials are sealed into the database", "key_id", sl.KeyID(), "key_ids", sl.KeyIDs())
	return lc, nil
}

// authenticate starts watching the roster (a reload revokes links no longer
// authorized and re-checks every open operator stream: ended, or re-scoped
// to the sites still allowed) and returns the authentication interceptors
// and the admission tap; with NoAuth it warns and returns none.
func (h *hub) authenticate() ([]grpc.ServerOption, error) {
	cfg, log := h.cfg, h.log
	if cfg.NoAuth {
		log.Warn("client authentication OFF (--no-auth): anyone who reaches the hub can report and quarantine; local development only")
		return nil, nil
	}
	var err error
	h.streams = authn.NewStreams(log.With("component", "roster"))
	h.watcher, err = auth.NewRosterWatcher(cfg.RosterPath, log.With("component", "roster"), func(_, new *auth.Roster) {
		h.linkSrv.RevokeUnauthorized(new)
		if ended, changed := h.streams.Reload(new); ended+changed > 0 {
			log.Info("roster reload applied to open streams", "ended", ended, "re_scoped", changed)
		}
		h.obs.rosterReloaded()
	})
	if err != nil {
		return nil, fmt.Errorf("roster: %w", err)
	}
	v := &auth.Verifier{Roster: h.watcher.Roster, Audience: cfg.Audience, MaxLifetime: cfg.MaxTokenLifetime, Replay: h.obs.replay(h.st)}
	log.Info("client authentication on", "roster", cfg.RosterPath, "clients", len(h.watcher.Roster().Clients()), "audience", cfg.Audience)
	h.gate = admission.New(cfg.Admission, v.Authentic, log.With("component", "admission"))
	return append(append(AuthOptions(v, log), grpc.ChainStreamInterceptor(h.streams.StreamInterceptor())), h.gate.ServerOptions()...), nil
}

// fleetView builds the fleet view when Web.Addr is set; it authenticates
// against the roster even with NoAuth.
func (h *hub) fleetView(fleetSrv *fleet.Server) error {
	if h.cfg.Web.Addr == "" {
		return nil
	}
	var err error
	if h.watcher == nil { // --no-auth: the fleet view still authenticates against the roster
		if h.watcher, err = auth.NewRosterWatcher(h.cfg.RosterPath, h.log.With("component", "roster"), nil); err != nil {
			return fmt.Errorf("roster: %w", err)
		}
	}
	h.webSrv, err = web.New(h.cfg.Web, fleetSrv, h.st, h.watcher.Roster, h.log.With("component", "web"))
	return err
}

// serve listens on cfg.Listen and serves, with the background loops, until
// ctx ends or one of them fails; then it drains.
func (h *hub) serve(ctx context.Context) error {
	lis, err := net.Listen("tcp", h.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", h.cfg.Listen, err)
	}
	if h.gate != nil {
		lis = h.gate.Listener(lis)
	}
	h.obs.start(ctx, h.st, h.srv, h.health, h.services, h.linkSrv, h.watcher)
	h.log.Info("hub serving", "listen", lis.Addr().String(), logkey.Replica, h.cfg.Replica)
	g, gctx := errgroup.WithContext(ctx)
	h.startLoops(gctx, g)
	g.Go(func() error {
		if err := h.srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("serve: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		h.drain()
		return nil
	})
	return g.Wait()
}

// startLoops starts the replica's background loops in g: the command and
// operation listeners, the stale-site sweep, history partitions, the
// last-seen flush, observability, policy, and the roster and fleet view
// when there are.
func (h *hub) startLoops(ctx context.Context, g *errgroup.Group) {
	cfg, log := h.cfg, h.log
	g.Go(func() error { return h.linkSrv.ListenForCommands(ctx) })
	g.Go(func() error { return h.opsSrv.Changes().Listen(ctx, h.st.Notifications()) })
	g.Go(func() error { h.linkSrv.RunStaleSweep(ctx, cfg.StaleAfter); return nil })
	g.Go(func() error { runHealthSweep(ctx, h.st, cfg.HealthSweep, log.With("component", "health")); return nil })
	g.Go(func() error { partitions.NewKeeper(h.st.Pool(), log).Run(ctx, cfg.History, time.Hour); return nil })
	g.Go(func() error { h.linkSrv.RunLastSeenFlush(ctx, cfg.Link.LastSeenFlush); return nil })
	g.Go(func() error { return h.obs.run(ctx) })
	g.Go(func() error { return h.pol.run(ctx) })
	g.Go(func() error { return h.profiles.run(ctx) })
	if h.labels != nil {
		g.Go(func() error { return h.labels.Run(ctx) })
	}
	g.Go(func() error { return h.templates.run(ctx) })
	if h.watcher != nil {
		g.Go(func() error { return h.watcher.Run(ctx) })
		g.Go(func() error { h.st.RunJTIPurge(ctx, time.Minute); return nil })
	}
	if h.webSrv != nil {
		g.Go(func() error { return h.webSrv.Run(ctx) })
	}
}

// drain shuts down: readiness off, links drained (satellites told to
// reconnect elsewhere), then a graceful stop bounded by ShutdownGrace.
func (h *hub) drain() {
	h.log.Info("hub shutting down: draining links", "links", h.linkSrv.Links())
	h.obs.drain()
	h.health.Shutdown()
	h.linkSrv.Drain()
	done := make(chan struct{})
	go func() { h.srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(h.cfg.ShutdownGrace):
		h.srv.Stop()
	}
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

// callLevel is the level of a call's "finished call" line: go-grpc-
// middleware's default, except Unavailable at debug level. Unavailable is
// the hub's "retry" (the database away, the replica draining): its cause is
// logged once where it is seen (readiness, the link), and a line for each
// retrying caller would repeat it many times a second during an outage.
func callLevel(c codes.Code) logging.Level {
	if c == codes.Unavailable {
		return logging.LevelDebug
	}
	return logging.DefaultServerCodeToLevel(c)
}

// NewGRPCServer builds the hub's gRPC server with keepalive enforcement and
// the logging and panic-recovery interceptors (go-grpc-middleware v2) on
// unary and stream calls, then the receive, stream and header limits of
// cfg.Admission with grpcerr.DecodeOptions (a request that cannot be
// decoded is InvalidArgument naming the field, not Internal; one larger
// than its service allows ResourceExhausted), followed by
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
	logOpts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall), logging.WithLevels(callLevel)}
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
	}, append(append(linkTransportOptions(), admission.LimitOptions(cfg.Admission)...), opts...)...)...)
}

package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"

	hubhealth "github.com/ironlink/ironlink/hub/health"
	"github.com/ironlink/ironlink/hub/link"
	"github.com/ironlink/ironlink/hub/metrics"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/telemetry"
)

// DefaultAdminAddr is where the admin listener (/metrics, /healthz,
// /readyz) binds unless --admin-addr says otherwise.
const DefaultAdminAddr = "127.0.0.1:9090"

// observability is the replica's metrics, readiness and admin listener,
// built before the store so that the store's queries are traced.
type observability struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics.Hub
	checker *hubhealth.Checker
	admin   net.Listener
	// tracing is set when OTEL_* turned tracing on; shutdown flushes it.
	tracing  bool
	shutdown func(context.Context) error
}

// newObservability creates the metrics and binds the admin listener (so a
// taken port fails the start, before anything else happens).
func newObservability(cfg Config, log *slog.Logger) (*observability, error) {
	o := &observability{cfg: cfg, log: log.With("component", "admin"), metrics: metrics.New(cfg.Replica)}
	shutdown, on, err := telemetry.Setup(context.Background(), "ironlink-hub")
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	o.tracing, o.shutdown = on, shutdown
	if on {
		log.Info("tracing on: spans go to the OTLP exporter set by OTEL_* variables")
	}
	if cfg.AdminAddr != "" {
		ln, err := hubhealth.Listen(cfg.AdminAddr)
		if err != nil {
			return nil, err
		}
		o.admin = ln
	}
	return o, nil
}

// storeOptions trace the store's queries for the database error counter.
func (o *observability) storeOptions() []store.Option {
	return []store.Option{store.WithTracer(o.metrics.Tracer())}
}

// serverOptions put the per-RPC metrics interceptors into the chain
// (before authentication, so refused calls are counted too).
// With tracing on, an otelgrpc stats handler starts a span per RPC
// (continuing the caller's W3C trace context).
func (o *observability) serverOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(o.metrics.GRPC.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(o.metrics.GRPC.StreamServerInterceptor()),
	}
	if o.tracing {
		opts = append(opts, grpc.StatsHandler(otelgrpc.NewServerHandler()))
	}
	return opts
}

// linkHooks feed the link events into the metrics.
func (o *observability) linkHooks() link.Hooks { return o.metrics.LinkHooks() }

// replay counts the replay cache's answers.
func (o *observability) replay(c auth.ReplayCache) auth.ReplayCache { return o.metrics.Replay(c) }

// rosterReloaded counts a roster reload that took effect.
func (o *observability) rosterReloaded() { o.metrics.RosterReloaded() }

// start wires what exists once the server is built: the readiness checker
// (its first verdict is in force before this returns, so the gRPC health
// service never claims SERVING for a replica that is not ready), the
// scrape-time collectors, and the gRPC method series.
func (o *observability) start(ctx context.Context, st *store.Store, srv *grpc.Server, hs *health.Server, services []string, linkSrv *link.Server, watcher *auth.RosterWatcher) {
	o.metrics.GRPC.InitializeMetrics(srv)
	o.metrics.WatchLinks(linkSrv.Links)
	o.metrics.WatchDatabase(st, 0, o.log)
	if watcher != nil {
		o.metrics.WatchRoster(watcher.LastError)
	}
	o.checker = hubhealth.NewChecker(st, hubhealth.Options{GRPC: hs, Services: services, OnChange: o.metrics.SetReady}, o.log)
	_ = o.checker.Check(ctx)
}

// run re-checks readiness and serves the admin listener until ctx ends.
func (o *observability) run(ctx context.Context) error {
	done := make(chan struct{})
	go func() { defer close(done); o.checker.Run(ctx, 0) }()
	defer func() { <-done }()
	if o.admin == nil {
		<-ctx.Done()
		return nil
	}
	o.log.Info("admin listener serving /metrics, /healthz, /readyz (plaintext)", "addr", o.admin.Addr().String())
	h := hubhealth.Handler(o.checker, o.metrics.Handler())
	if o.cfg.AdminPprof {
		o.log.Info("admin listener also serving /debug/pprof/")
		h = hubhealth.WithPprof(h)
	}
	return hubhealth.Serve(ctx, o.admin, h)
}

// close flushes buffered spans (at most 5 s).
func (o *observability) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := o.shutdown(ctx); err != nil {
		o.log.Warn("flushing traces", "err", err)
	}
}

// drain turns readiness off at once (shutdown).
func (o *observability) drain() {
	if o.checker != nil {
		o.checker.SetDraining()
	}
}

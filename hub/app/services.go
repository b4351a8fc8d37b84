package app

import (
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/fleet"
	"github.com/ironlink/ironlink/hub/healthapi"
	"github.com/ironlink/ironlink/hub/link"
	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/validation"
	"github.com/ironlink/ironlink/internal/auth"
)

// AuthOptions returns the server options that authenticate and authorize
// every call but health and reflection with v (hub/authn), for
// NewGRPCServer: they run after its logging and panic-recovery interceptors.
// Run and the test harness (test/grpctest) both use it.
func AuthOptions(v *auth.Verifier, log *slog.Logger) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(authn.UnaryInterceptor(v, log)),
		grpc.ChainStreamInterceptor(authn.StreamInterceptor(v, log)),
	}
}

// NewFleetServer returns the operator API over st, naming the authenticated
// client (or "anonymous" without authentication) as the actor of every change.
func NewFleetServer(st *store.Store, log *slog.Logger) *fleet.Server {
	return fleet.NewServer(st, actorFromContext, log)
}

// RegisterServices registers the hub's services on srv: the link and fleet
// services, health (every service SERVING) and server reflection. It returns
// the health server, for Shutdown when the hub drains.
func RegisterServices(srv *grpc.Server, linkSrv ironlinkv1.LinkServiceServer, fleetSrv ironlinkv1.FleetServiceServer) *health.Server {
	ironlinkv1.RegisterLinkServiceServer(srv, linkSrv)
	ironlinkv1.RegisterFleetServiceServer(srv, fleetSrv)
	if b, ok := fleetSrv.(interface {
		Bulk() ironlinkv1.BulkServiceServer
	}); ok { // the bulk quarantine/release by selector (hub/fleet/bulk.go)
		ironlinkv1.RegisterBulkServiceServer(srv, b.Bulk())
	}
	if h, ok := fleetSrv.(interface {
		Hardware() ironlinkv1.HardwareServiceServer
	}); ok { // drift, hardware history, validation runs (hub/fleet/drift.go)
		ironlinkv1.RegisterHardwareServiceServer(srv, h.Hardware())
	}
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	for _, svc := range []string{"", ironlinkv1.LinkService_ServiceDesc.ServiceName, ironlinkv1.FleetService_ServiceDesc.ServiceName, ironlinkv1.BulkService_ServiceDesc.ServiceName,
		ironlinkv1.HardwareService_ServiceDesc.ServiceName} {
		hs.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
	}
	return hs
}

// NewOperationServer returns the operations API over st, sharing linkSrv's
// credential vault (ENROL's BMC credentials stay in this process's memory)
// and waking linkSrv's link of a site when an operation is asked for.
func NewOperationServer(st *store.Store, linkSrv *link.Server, log *slog.Logger) *operations.Server {
	return operations.NewServer(st, operations.Config{Vault: linkSrv.Vault(), Actor: actorFromContext, Wake: linkSrv.Wake}, log)
}

// RegisterOperations registers the operations service on srv (after
// RegisterServices; reflection lists it) and marks it SERVING on hs.
func RegisterOperations(srv *grpc.Server, hs *health.Server, opsSrv ironlinkv1.OperationServiceServer) {
	ironlinkv1.RegisterOperationServiceServer(srv, opsSrv)
	hs.SetServingStatus(ironlinkv1.OperationService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
}

// NewHealthServer returns HealthService over st with cfg's TTLs (the agent
// TTLs were checked by Validate); events clamped to the hub's clock are
// logged and passed to clamped (nil: not counted).
func NewHealthServer(st *store.Store, cfg Config, log *slog.Logger, clamped func(n int)) *healthapi.Server {
	agents, _ := healthapi.ParseAgentTTL(cfg.HealthAgentTTL)
	return healthapi.NewServer(st, healthapi.Config{DefaultTTL: cfg.HealthDefaultTTL, AgentTTL: agents,
		ReporterRate: cfg.HealthReporterRate, ReporterBurst: cfg.HealthReporterBurst,
		OnClamped: func(n int) {
			log.Warn("health events with a generated time in the future clamped to now", "count", n)
			if clamped != nil {
				clamped(n)
			}
		}}, log)
}

// RegisterHealth registers HealthService on srv and marks it SERVING on hs.
func RegisterHealth(srv *grpc.Server, hs *health.Server, healthSrv ironlinkv1.HealthServiceServer) {
	ironlinkv1.RegisterHealthServiceServer(srv, healthSrv)
	hs.SetServingStatus(ironlinkv1.HealthService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
}

// RegisterValidation registers ValidationService over st on srv (results
// recorded with the authenticated client as reporter; wake, may be nil,
// nudges the validation runner) and marks it SERVING on hs.
func RegisterValidation(srv *grpc.Server, hs *health.Server, st *store.Store, wake func(), log *slog.Logger) {
	ironlinkv1.RegisterValidationServiceServer(srv, validation.NewServer(st, actorFromContext, wake, log))
	hs.SetServingStatus(ironlinkv1.ValidationService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
}

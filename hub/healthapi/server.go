package healthapi

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/reporterlimit"
	"github.com/ironlink/ironlink/internal/sitename"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// Store is the part of hub/store HealthService uses.
type Store interface {
	// ReportHealth commits one batch of a site (hub/store.Store.ReportHealth).
	ReportHealth(ctx context.Context, site string, events []store.HealthEvent) ([]store.HealthEventResult, error)
}

// Config is the service's configuration (hub flags --health-default-ttl,
// --health-agent-ttl).
type Config struct {
	// DefaultTTL is the TTL of an event that sends none and whose agent
	// has none in AgentTTL.
	DefaultTTL time.Duration
	// AgentTTL is the TTL per agent name.
	AgentTTL map[string]time.Duration
	// Now is the hub's clock (nil: time.Now).
	Now func() time.Time
	// OnClamped is called with the number of events of a batch whose
	// generated time was in the future (nil: not counted).
	OnClamped func(n int)
	// ReporterRate and ReporterBurst bound each reporter's events
	// (throttle.go); a rate ≤ 0 limits nothing.
	ReporterRate  float64
	ReporterBurst int
}

// Server implements ironlinkv1.HealthServiceServer.
type Server struct {
	ironlinkv1.UnimplementedHealthServiceServer
	st  Store
	cfg Config
	log *slog.Logger
	lim *reporterlimit.Limiter
}

// NewServer returns HealthService over st.
func NewServer(st Store, cfg Config, log *slog.Logger) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Server{st: st, cfg: cfg, log: log, lim: reporterlimit.New(cfg.ReporterRate, cfg.ReporterBurst)}
}

// ReportHealth validates the batch, checks that the caller may report for
// the site (its roster site), commits it and answers per event. See the
// proto for the errors.
func (s *Server) ReportHealth(ctx context.Context, req *ironlinkv1.ReportHealthRequest) (*ironlinkv1.ReportHealthResponse, error) {
	site := req.GetSite()
	if err := sitename.Check(site); err != nil {
		return nil, grpcerr.InvalidArgument("site", grpcerr.ReasonInvalidValue, fmt.Sprintf("site %s: %v", textcheck.Quote(site), err))
	}
	if sc := authn.CallerScope(ctx); !sc.Allows(site) {
		return nil, sc.Deny(ctx, s.log, "site "+site, site)
	}
	if err := s.throttle(ctx, req.GetEvents()); err != nil {
		return nil, err
	}
	return s.ReportSite(ctx, site, req.GetEvents())
}

// ReportSite validates and commits one batch of site's events, with no
// check of the caller: ReportHealth after its checks, and the link server
// for a satellite's HealthReport (the link's site). Errors as ReportHealth's
// but PermissionDenied.
func (s *Server) ReportSite(ctx context.Context, site string, events []*ironlinkv1.HealthEvent) (*ironlinkv1.ReportHealthResponse, error) {
	n := len(events)
	if n == 0 || n > MaxEvents {
		return nil, grpcerr.InvalidArgument("events", grpcerr.ReasonInvalidValue, fmt.Sprintf("events: %d events, want 1 to %d", n, MaxEvents))
	}
	in := eventInput{now: s.cfg.Now().UTC(), defaultTTL: s.cfg.DefaultTTL, agentTTL: s.cfg.AgentTTL}
	evs := make([]store.HealthEvent, n)
	clamped := make([]bool, n)
	nClamped := 0
	for i, e := range events {
		var err error
		if evs[i], clamped[i], err = in.toStoreEvent(i, e); err != nil {
			return nil, err
		}
		if clamped[i] {
			nClamped++
		}
	}
	if nClamped > 0 && s.cfg.OnClamped != nil {
		s.cfg.OnClamped(nClamped)
	}
	res, err := s.st.ReportHealth(ctx, site, evs)
	if err != nil {
		return nil, grpcerr.FromStore(err)
	}
	out := &ironlinkv1.ReportHealthResponse{Results: make([]*ironlinkv1.HealthEventResult, n)}
	for i, r := range res {
		out.Results[i] = &ironlinkv1.HealthEventResult{EventId: evs[i].EventID, DeviceId: r.DeviceID,
			ConditionType: string(evs[i].Condition.Type), Applied: r.Applied, Duplicate: r.Duplicate,
			Superseded: r.Superseded, Clamped: clamped[i]}
	}
	return out, nil
}

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
	// validationWake nudges the validation runner after an event recorded
	// a validation run's result (nil: none).
	validationWake func()
}

// SetValidationWake sets the function called after a committed batch in
// which an event recorded a validation run's check result (the hub's
// validation runner's Wake); call it before serving.
func (s *Server) SetValidationWake(wake func()) { s.validationWake = wake }

// wakeValidation calls the validation wake when res recorded a result.
func (s *Server) wakeValidation(res []store.HealthEventResult) {
	if s.validationWake == nil {
		return
	}
	for _, r := range res {
		if r.ValidationRunID != "" {
			s.validationWake()
			return
		}
	}
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
// check of the caller: ReportHealth after its checks. Errors as
// ReportHealth's but PermissionDenied.
func (s *Server) ReportSite(ctx context.Context, site string, events []*ironlinkv1.HealthEvent) (*ironlinkv1.ReportHealthResponse, error) {
	v, err := s.validate(events)
	if err != nil {
		return nil, err
	}
	s.countClamped(v)
	res, err := s.st.ReportHealth(ctx, site, v.evs)
	if err != nil {
		return nil, grpcerr.FromStore(err)
	}
	s.wakeValidation(res)
	return v.response(res), nil
}

// ReportSiteBatches validates and commits several batches of site's events
// (a link's waiting HealthReports) in one store transaction, with no check
// of the caller; it answers per batch, in order: a response, or the
// error ReportSite would have answered for that batch alone. A batch
// that fails validation is refused alone; when the store refuses the
// combined transaction (an unknown or ambiguous device of one batch), the
// valid batches are committed again one by one, so one bad batch never
// refuses another. Every committed batch is committed exactly once.
func (s *Server) ReportSiteBatches(ctx context.Context, site string, batches [][]*ironlinkv1.HealthEvent) ([]*ironlinkv1.ReportHealthResponse, []error) {
	out := make([]*ironlinkv1.ReportHealthResponse, len(batches))
	errs := make([]error, len(batches))
	valid := make([]*validated, len(batches))
	var all []store.HealthEvent
	var ok []int
	for k, events := range batches {
		v, err := s.validate(events)
		if err != nil {
			errs[k] = err
			continue
		}
		s.countClamped(v)
		valid[k] = v
		ok = append(ok, k)
		all = append(all, v.evs...)
	}
	if len(ok) == 0 {
		return out, errs
	}
	res, err := s.st.ReportHealth(ctx, site, all)
	if err == nil {
		s.wakeValidation(res)
		for _, k := range ok {
			n := len(valid[k].evs)
			out[k], res = valid[k].response(res[:n]), res[n:]
		}
		return out, errs
	}
	if len(ok) == 1 || ctx.Err() != nil {
		for _, k := range ok {
			errs[k] = grpcerr.FromStore(err)
		}
		return out, errs
	}
	for _, k := range ok {
		r, err := s.st.ReportHealth(ctx, site, valid[k].evs)
		if err != nil {
			errs[k] = grpcerr.FromStore(err)
			continue
		}
		s.wakeValidation(r)
		out[k] = valid[k].response(r)
	}
	return out, errs
}

// validated is one batch checked and converted for the store.
type validated struct {
	evs      []store.HealthEvent
	clamped  []bool
	nClamped int
}

// validate checks a batch's size and every event (InvalidArgument naming
// the field) and converts it.
func (s *Server) validate(events []*ironlinkv1.HealthEvent) (*validated, error) {
	n := len(events)
	if n == 0 || n > MaxEvents {
		return nil, grpcerr.InvalidArgument("events", grpcerr.ReasonInvalidValue, fmt.Sprintf("events: %d events, want 1 to %d", n, MaxEvents))
	}
	in := eventInput{now: s.cfg.Now().UTC(), defaultTTL: s.cfg.DefaultTTL, agentTTL: s.cfg.AgentTTL}
	v := &validated{evs: make([]store.HealthEvent, n), clamped: make([]bool, n)}
	for i, e := range events {
		var err error
		if v.evs[i], v.clamped[i], err = in.toStoreEvent(i, e); err != nil {
			return nil, err
		}
		if v.clamped[i] {
			v.nClamped++
		}
	}
	return v, nil
}

// countClamped reports v's clamped events to Config.OnClamped.
func (s *Server) countClamped(v *validated) {
	if v.nClamped > 0 && s.cfg.OnClamped != nil {
		s.cfg.OnClamped(v.nClamped)
	}
}

// response is the answer for v given the store's results of its events.
func (v *validated) response(res []store.HealthEventResult) *ironlinkv1.ReportHealthResponse {
	out := &ironlinkv1.ReportHealthResponse{Results: make([]*ironlinkv1.HealthEventResult, len(res))}
	for i, r := range res {
		out.Results[i] = &ironlinkv1.HealthEventResult{EventId: v.evs[i].EventID, DeviceId: r.DeviceID,
			ConditionType: string(v.evs[i].Condition.Type), Applied: r.Applied, Duplicate: r.Duplicate,
			Superseded: r.Superseded, Clamped: v.clamped[i], ValidationRunId: r.ValidationRunID}
	}
	return out
}

package link

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/auth"
)

// FeatureHealth is the Welcome feature saying the hub takes HealthReports
// on the link (docs/reference/health.md "The satellite's local door").
const FeatureHealth = "health"

// HealthReporter commits a site's health events (hub/healthapi.Server's
// ReportSite): validation, the device mapping and idempotency are
// HealthService.ReportHealth's.
type HealthReporter interface {
	// ReportSite validates and commits events of site; its errors are gRPC
	// statuses (InvalidArgument, NotFound, FailedPrecondition, ...).
	ReportSite(ctx context.Context, site string, events []*ironlinkv1.HealthEvent) (*ironlinkv1.ReportHealthResponse, error)
}

// features lists what Welcome advertises.
func (s *Server) features() []string {
	if s.cfg.Health == nil {
		return nil
	}
	return []string{FeatureHealth}
}

// receiveHealth checks a satellite's HealthReport and queues its commit on
// the link's health queue. Only a missing scope ends the link: a refused report
// is answered with its status in a HealthResult.
func (l *linkLoop) receiveHealth(r *ironlinkv1.HealthReport) error {
	if err := l.needScope(auth.ScopeDeviceConditionCreate, "report health"); err != nil {
		return err
	}
	l.health.push(task{kind: "health", run: func(ctx context.Context) outcome {
		return outcome{send: []*ironlinkv1.ConnectResponse{{Msg: &ironlinkv1.ConnectResponse_HealthResult{
			HealthResult: l.reportHealth(ctx, r)}}}}
	}})
	return nil
}

// reportHealth commits r for the link's site and returns its result.
func (l *linkLoop) reportHealth(ctx context.Context, r *ironlinkv1.HealthReport) *ironlinkv1.HealthResult {
	out := &ironlinkv1.HealthResult{ReportId: r.GetReportId()}
	if l.s.cfg.Health == nil {
		out.Code, out.Message = int32(codes.Unimplemented), "this hub does not take health reports on the link"
		return out
	}
	res, err := l.s.cfg.Health.ReportSite(ctx, l.site, r.GetEvents())
	if err != nil {
		if ctx.Err() != nil {
			err = grpcerr.FromContext(ctx.Err())
		}
		st := status.Convert(err)
		out.Code, out.Message = int32(st.Code()), st.Message()
		l.log.Info("health report refused", "report_id", r.GetReportId(), "events", len(r.GetEvents()), "code", st.Code().String(), "err", err)
		return out
	}
	out.Results = res.GetResults()
	l.log.Debug(fmt.Sprintf("health report committed: %d events", len(r.GetEvents())), "report_id", r.GetReportId())
	return out
}

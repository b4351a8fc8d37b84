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
// ReportSiteBatches): validation, the device mapping and idempotency are
// HealthService.ReportHealth's.
type HealthReporter interface {
	// ReportSiteBatches validates and commits several batches of site's
	// events in one transaction and answers per batch, in order: a
	// response or the gRPC status (InvalidArgument, NotFound,
	// FailedPrecondition, ...) that batch alone would have been refused
	// with; one batch's refusal never refuses another.
	ReportSiteBatches(ctx context.Context, site string, batches [][]*ironlinkv1.HealthEvent) ([]*ironlinkv1.ReportHealthResponse, []error)
}

// features lists what Welcome advertises.
func (s *Server) features() []string {
	if s.cfg.Health == nil {
		return nil
	}
	return []string{FeatureHealth}
}

// receiveHealth checks a satellite's HealthReport and queues its commit on
// the link's health queue: reports that arrive while a commit runs wait in
// one task (at most MaxPendingHealth of them) and are committed together,
// in one transaction, each answered with its own HealthResult once that
// transaction committed. Only a missing scope ends the link: a refused
// report is answered with its status in a HealthResult, alone.
func (l *linkLoop) receiveHealth(r *ironlinkv1.HealthReport) error {
	if err := l.needScope(auth.ScopeDeviceConditionCreate, "report health"); err != nil {
		return err
	}
	if len(l.health.pending) > 0 && len(l.healthNext.reports) < MaxPendingHealth {
		l.healthNext.reports = append(l.healthNext.reports, r)
		return nil
	}
	b := &healthBatch{reports: []*ironlinkv1.HealthReport{r}}
	l.healthNext = b
	l.health.push(task{kind: "health", run: func(ctx context.Context) outcome {
		return outcome{send: l.reportHealth(ctx, b.reports)}
	}})
	return nil
}

// healthBatch is the HealthReports one health task commits; the loop adds
// to it only while the task waits (it is then l.healthNext, and its task
// in l.health.pending), never once it runs.
type healthBatch struct {
	reports []*ironlinkv1.HealthReport
}

// healthFull says the loop should stop reading the stream: the waiting
// health task holds MaxPendingHealth reports.
func (l *linkLoop) healthFull() bool {
	return len(l.health.pending) > 0 && len(l.healthNext.reports) >= MaxPendingHealth
}

// reportHealth commits reports for the link's site and returns their
// results, one HealthResult per report, in order.
func (l *linkLoop) reportHealth(ctx context.Context, reports []*ironlinkv1.HealthReport) []*ironlinkv1.ConnectResponse {
	out := make([]*ironlinkv1.ConnectResponse, len(reports))
	results := make([]*ironlinkv1.HealthResult, len(reports))
	for k, r := range reports {
		results[k] = &ironlinkv1.HealthResult{ReportId: r.GetReportId()}
		out[k] = &ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_HealthResult{HealthResult: results[k]}}
	}
	if l.s.cfg.Health == nil {
		for _, res := range results {
			res.Code, res.Message = int32(codes.Unimplemented), "this hub does not take health reports on the link"
		}
		return out
	}
	batches := make([][]*ironlinkv1.HealthEvent, len(reports))
	events := 0
	for k, r := range reports {
		batches[k] = r.GetEvents()
		events += len(batches[k])
	}
	resps, errs := l.s.cfg.Health.ReportSiteBatches(ctx, l.site, batches)
	for k, r := range reports {
		if err := errs[k]; err != nil {
			if ctx.Err() != nil {
				err = grpcerr.FromContext(ctx.Err())
			}
			st := status.Convert(err)
			results[k].Code, results[k].Message = int32(st.Code()), st.Message()
			l.log.Info("health report refused", "report_id", r.GetReportId(), "events", len(r.GetEvents()), "code", st.Code().String(), "err", err)
			continue
		}
		results[k].Results = resps[k].GetResults()
	}
	l.log.Debug(fmt.Sprintf("health reports answered: %d reports, %d events, one transaction", len(reports), events))
	return out
}

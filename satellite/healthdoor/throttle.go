package healthdoor

import (
	"time"

	"google.golang.org/grpc/codes"

	"github.com/ironlink/ironlink/gen/datamodels"
	"github.com/ironlink/ironlink/internal/reporterlimit"
	"github.com/ironlink/ironlink/internal/rpcstatus"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// DefaultReporterRate and DefaultReporterBurst are the door's per-agent
// limits (--health-reporter-rate, --health-reporter-burst): events per
// second and burst.
const (
	DefaultReporterRate  = 200
	DefaultReporterBurst = 2000
)

// SetReporterLimit makes the door take each batch's events from their
// agents' buckets (internal/reporterlimit) after the batch-size check and before anything else: one
// monitor flooding the door is refused without starving the others. Call
// before serving.
func (s *Server) SetReporterLimit(l *reporterlimit.Limiter) { s.lim = l }

// throttle takes in's events per agent (NVSentinel's HealthEvent.agent),
// all or none. Errors: ResourceExhausted naming the agent and when to
// retry; the batch is counted refused and not spooled.
func (s *Server) throttle(in *datamodels.HealthEvents) error {
	counts := map[string]int{}
	for _, e := range in.GetEvents() {
		counts[textcheck.Prefix(e.GetAgent(), 64)]++
	}
	ok, over, after := s.lim.Take(counts, time.Now())
	if ok {
		return nil
	}
	s.metrics.add(OutcomeRefused, len(in.GetEvents()))
	return rpcstatus.Errorf(codes.ResourceExhausted, "agent %s is over its limit of health events (--health-reporter-rate): this batch was not taken; retry in %s",
		textcheck.Quote(over), after.Round(time.Millisecond))
}

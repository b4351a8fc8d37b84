package healthapi

import (
	"context"
	"fmt"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// maxAgentKeyBytes bounds the agent name in a reporter key (the event is
// validated after the throttle, so a flood costs little).
const maxAgentKeyBytes = 64

// throttle takes the batch's events from its reporters' buckets (a
// reporter: the caller's client id and the event's agent, so one checker
// flooding does not starve the other checkers of its client, nor other
// clients). Errors: ResourceExhausted RATE_LIMITED with RetryInfo naming
// the reporter over its rate; nothing is written then.
func (s *Server) throttle(ctx context.Context, events []*ironlinkv1.HealthEvent) error {
	client := "anonymous"
	if id, ok := authn.FromContext(ctx); ok {
		client = id.ClientID
	}
	counts := map[string]int{}
	for _, e := range events {
		counts[client+"/"+textcheck.Prefix(e.GetAgent(), maxAgentKeyBytes)]++
	}
	ok, over, after := s.lim.Take(counts, s.cfg.Now())
	if ok {
		return nil
	}
	return grpcerr.RateLimited(fmt.Sprintf("health reporter %s is over its limit of %g events/s (burst %d): this batch was not taken; retry in %s",
		textcheck.Quote(over), s.cfg.ReporterRate, s.cfg.ReporterBurst, after.Round(1e6)), after)
}

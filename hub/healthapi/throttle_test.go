package healthapi

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/testlog"
)

// TestThrottlePerReporter: a flooding agent is refused (ResourceExhausted
// RATE_LIMITED naming it) while another agent of the same client still
// gets its whole burst.
func TestThrottlePerReporter(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewServer(nil, Config{ReporterRate: 1, ReporterBurst: 3, Now: func() time.Time { return now }}, testlog.New(t))
	batch := func(agent string, n int) []*ironlinkv1.HealthEvent {
		out := make([]*ironlinkv1.HealthEvent, n)
		for i := range out {
			out[i] = &ironlinkv1.HealthEvent{Agent: agent}
		}
		return out
	}
	ctx := context.Background()
	if err := s.throttle(ctx, batch("flood", 3)); err != nil {
		t.Fatalf("first burst: %v", err)
	}
	err := s.throttle(ctx, batch("flood", 1))
	if status.Code(err) != codes.ResourceExhausted || grpcerr.Reason(err) != grpcerr.ReasonRateLimited || !strings.Contains(err.Error(), "flood") {
		t.Fatalf("flood: %v, want ResourceExhausted RATE_LIMITED naming the reporter", err)
	}
	if err := s.throttle(ctx, batch("quiet", 3)); err != nil {
		t.Errorf("another agent while one floods: %v", err)
	}
}

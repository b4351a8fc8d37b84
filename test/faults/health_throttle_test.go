package faults

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/ironlink/ironlink/gen/datamodels"
	"github.com/ironlink/ironlink/internal/promtest"
	"github.com/ironlink/ironlink/test/harness"
)

// psu is a BMC scraper's non-fatal PSU event for node, generated now.
func psu(node, code string) *datamodels.HealthEvent {
	return &datamodels.HealthEvent{Agent: "bmc-monitor", ComponentClass: "PSU", CheckName: "PsuRedundancy",
		Message: "PSU " + code, ErrorCode: []string{code}, GeneratedTimestamp: timestamppb.Now(), NodeName: node}
}

// TestHealthDoorThrottlesAFlood runs the satellite's door with
// --health-reporter-rate 1 --health-reporter-burst 4: one agent
// (gpu-health-monitor) sends its burst, then floods batches of 4 events;
// each is refused at once with ResourceExhausted naming the agent, and the
// door's metrics count every refused event. Meanwhile another agent
// (bmc-monitor) sends a batch through the same door and it is committed:
// its condition is on the device when the call returns.
func TestHealthDoorThrottlesAFlood(t *testing.T) {
	hs := startHealthSite(t, "health-flood", 3, healthSiteOptions{satExtra: []string{"--health-reporter-rate", "1", "--health-reporter-burst", "4"}})
	nodes := hs.site.sim.Nodes()
	fc := harness.Fleet(t, hs.hub.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	batch := func(code string) []*datamodels.HealthEvent {
		var evs []*datamodels.HealthEvent
		for i := range 4 {
			evs = append(evs, xid(nodes[i%2].Name, code, false))
		}
		return evs
	}
	if err := report(ctx, hs.door, batch("63")...); err != nil {
		t.Fatalf("the flooding agent's first batch (its burst): %v", err)
	}

	// The flood: 30 batches of 4 as fast as the door answers.
	var (
		mu      sync.Mutex
		refused int
		taken   int // batches the refilled bucket took
		wrong   []string
	)
	stop := make(chan struct{})
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
		for i := 0; i < 30; i++ {
			err := report(ctx, hs.door, batch("64")...)
			mu.Lock()
			if st := status.Convert(err); err == nil {
				taken++
			} else if st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), `gpu-health-monitor`) {
				refused++
			} else {
				wrong = append(wrong, st.String())
			}
			mu.Unlock()
			if i == 10 {
				close(stop) // the other agent goes now, mid-flood
			}
		}
	}()
	<-stop
	if err := report(ctx, hs.door, psu(nodes[2].Name, "PSU1"), psu(nodes[2].Name, "PSU2"), psu(nodes[1].Name, "PSU1")); err != nil {
		t.Fatalf("another agent's batch during the flood: %v, want committed", err)
	}
	if got := healthConditions(device(t, fc, nodes[2].UUID)); len(got) != 1 || got[0] != "health.PSU/PsuRedundancy" {
		t.Errorf("after the other agent's batch: health conditions of %s %v, want [health.PSU/PsuRedundancy]", nodes[2].Name, got)
	}
	<-flooded
	// Rate 1/s, 4 tokens a batch: at most one batch of the 30 (sent in
	// well under 4 s in practice) can find its bucket refilled.
	if refused < 29 || len(wrong) > 0 {
		t.Fatalf("flood: %d of 30 batches refused ResourceExhausted naming the agent, %d taken, other answers: %q", refused, taken, wrong)
	}
	page := promtest.Scrape(t, hs.metrics)
	if v, _ := page.Value("ironlink_satellite_health_events_total", "outcome", "refused"); v != float64(4*refused) {
		t.Errorf("ironlink_satellite_health_events_total{outcome=refused} = %g, want %d (4 per refused batch)", v, 4*refused)
	}
	if v, _ := page.Value("ironlink_satellite_health_events_total", "outcome", "committed"); v != float64(4+3+4*taken) {
		t.Errorf("ironlink_satellite_health_events_total{outcome=committed} = %g, want %d", v, 4+3+4*taken)
	}
}

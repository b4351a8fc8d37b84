package faults

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/ironlink/ironlink/gen/datamodels"
	"github.com/ironlink/ironlink/internal/promtest"
	"github.com/ironlink/ironlink/test/harness"
)

// TestHealthSpoolFullDropsOldest: the satellite's door spools reports
// while the hub is down, bounded (--health-spool-events 256, the least
// it takes) and counted when full. Two reports of 128 events fill the
// spool; a third drops the oldest (its caller gets Unavailable, dropped
// counts 128). When the hub is back at the same address the two kept
// reports are committed and their callers answered; the dropped events
// were never written. (A batch larger than the whole spool, refused with
// ResourceExhausted, cannot be sent at the least bound: satellite/healthdoor
// TestSpoolCombinesKeepsOrderAndDropsOldest.)
func TestHealthSpoolFullDropsOldest(t *testing.T) {
	db, pool := newDatabase(t)
	hub := startHub(t, db, "hub-a")
	s := newSite(t, "health-spool", 4)
	sock := filepath.Join(t.TempDir(), "health.sock")
	metrics := harness.FreeAddr(t)
	s.startSatellite(t, "", hub.Addr, "--health-socket", sock, "--health-spool-events", "256", "--health-wait", "60s", "--metrics-addr", metrics)
	waitDevices(t, pool, s, 30*time.Second)
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	door := datamodels.NewPlatformConnectorClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := s.sim.Nodes()
	// batch is 128 events of check on nodes a and b (alternating), each
	// generated a millisecond apart: the newest per device wins.
	batch := func(check, code string, fatal bool, a, b string) []*datamodels.HealthEvent {
		now := time.Now()
		var evs []*datamodels.HealthEvent
		for i := range 128 {
			e := xid([]string{a, b}[i%2], code, fatal)
			e.CheckName = check
			e.GeneratedTimestamp = timestamppb.New(now.Add(time.Duration(i-128) * time.Millisecond))
			evs = append(evs, e)
		}
		return evs
	}

	hub.Stop(5 * time.Second)
	send := func(evs []*datamodels.HealthEvent) chan error {
		done := make(chan error, 1)
		go func() { done <- report(ctx, door, evs...) }()
		time.Sleep(300 * time.Millisecond) // arrival order is the spool's order
		return done
	}
	oldest := send(batch("GpuXidError", "79", true, nodes[0].Name, nodes[1].Name))
	kept1 := send(batch("GpuXidError", "48", true, nodes[2].Name, nodes[3].Name))
	kept2 := send(batch("GpuThermalWatch", "thermal", false, nodes[0].Name, nodes[1].Name))
	select {
	case err := <-oldest:
		if status.Code(err) != codes.Unavailable {
			t.Errorf("the dropped report's caller: %v, want Unavailable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the oldest report's caller is still waiting after the spool dropped it")
	}
	page := promtest.Scrape(t, "http://"+metrics+"/metrics")
	if v, _ := page.Value("ironlink_satellite_health_events_total", "outcome", "dropped"); v != 128 {
		t.Errorf("dropped = %g, want 128 (the oldest report)", v)
	}
	if v, _ := page.Value("ironlink_satellite_health_spool_events"); v != 256 {
		t.Errorf("spool holds %g events, want 256 (its bound)", v)
	}

	hub = harness.StartHubAt(t, bins, hub.Addr, db, "hub-a", fastHub()...)
	for i, done := range []chan error{kept1, kept2} {
		if err := <-done; err != nil {
			t.Errorf("kept report %d after the hub came back: %v", i+1, err)
		}
	}
	fc := harness.Fleet(t, hub.Addr)
	if got := healthConditions(device(t, fc, nodes[0].UUID)); !slices.Equal(got, []string{"health.GPU/GpuThermalWatch"}) {
		t.Errorf("%s: health conditions %v, want only the kept thermal warning (its XID 79 was dropped)", nodes[0].Name, got)
	}
	if got := healthConditions(device(t, fc, nodes[2].UUID)); !slices.Equal(got, []string{"health.GPU/GpuXidError"}) {
		t.Errorf("%s: health conditions %v, want the kept XID 48", nodes[2].Name, got)
	}
	page = promtest.Scrape(t, "http://"+metrics+"/metrics")
	for outcome, want := range map[string]float64{"accepted": 384, "committed": 256, "dropped": 128} {
		if v, _ := page.Value("ironlink_satellite_health_events_total", "outcome", outcome); v != want {
			t.Errorf("ironlink_satellite_health_events_total{outcome=%q} = %g, want %g", outcome, v, want)
		}
	}
}

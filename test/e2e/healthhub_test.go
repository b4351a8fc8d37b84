package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

// TestHealthHubDoorRealProcesses: the hub's HealthService on a real hub
// process (TLS, roster, client assertions) with two sites' satellites.
// A checker bound to site A (roster healthCheckers, device-health:create)
// reports a fatal XID 79 for a device of A: the device turns FAULTED
// naming the check, and the same batch again is a duplicate. Naming site
// B, a device of B, or a node name of B, is PermissionDenied and writes
// nothing; an operator without the scope is PermissionDenied. A flood from one agent
// (--health-reporter-rate 1, --health-reporter-burst 20) is refused with
// ResourceExhausted while another agent of the same checker, and another
// checker, still report.
func TestHealthHubDoorRealProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sites := []string{"hda", "hdb"}
	id := newIdentity(t, sites, map[string][]string{"ops-admin": {auth.ScopeOperationsRead, auth.ScopeOperationsWrite}})
	id.addChecker(t, "gpu-mon-a", "hda")
	id.addChecker(t, "gpu-mon-a2", "hda")
	db := pgtest.NewDatabase(t)
	hubAddr, _ := startHub(t, db, id, "--health-reporter-rate", "1", "--health-reporter-burst", "20")
	devs := map[string][]openstacksim.Node{}
	for _, site := range sites {
		sim := openstacksim.New(openstacksim.Options{})
		if err := sim.Start("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sim.Close() })
		for i := range 2 {
			devs[site] = append(devs[site], sim.AddNode(openstacksim.Node{Name: fmt.Sprintf("%s-gpu-%d", site, i), ProvisionState: "available",
				PowerState: "power off", ResourceClass: "gpu-h100"}))
		}
		clouds := filepath.Join(t.TempDir(), "clouds.yaml")
		if err := sim.WriteCloudsYAML(clouds, "sim"); err != nil {
			t.Fatal(err)
		}
		harness.Start(t, "ironlink-satellite "+site, bins.Satellite(), append([]string{"--site", site, "--hub", hubAddr, "--clouds-yaml", clouds,
			"--cloud", "sim", "--poll-interval", "1s", "--max-backoff", "1s", "--auth-backoff", "1s",
			"--state-file", filepath.Join(t.TempDir(), "state.json")}, id.satelliteArgs(site)...)...)
	}
	fc := ironlinkv1.NewFleetServiceClient(id.dialAs(t, hubAddr, "ops-admin"))
	harness.Eventually(t, 60*time.Second, func() error {
		for _, site := range sites {
			if r, err := fc.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: site}); err != nil || len(r.GetDevices()) != 2 {
				return fmt.Errorf("site %s: %d devices at the hub (%v)", site, len(r.GetDevices()), err)
			}
		}
		return nil
	})
	checker := ironlinkv1.NewHealthServiceClient(id.dialAs(t, hubAddr, "gpu-mon-a"))
	a, b := devs["hda"][0], devs["hdb"][0]
	ev := func(dev, agent string, i int) *ironlinkv1.HealthEvent {
		return &ironlinkv1.HealthEvent{DeviceId: dev, Agent: agent, ComponentClass: "GPU", CheckName: "GpuXidError", IsFatal: true,
			Message: "XID 79: GPU has fallen off the bus", ErrorCodes: []string{"79"},
			EntitiesImpacted: []*ironlinkv1.HealthEntity{{EntityType: "GPU", EntityValue: "3"}},
			GeneratedTime:    timestamppb.New(time.Now().Add(time.Duration(i-1000) * time.Millisecond))}
	}
	healthOf := func(dev string) int {
		n := 0
		for _, c := range getDevice(t, fc, dev).GetDevice().GetConditions() {
			if strings.HasPrefix(c.GetType(), "health.") {
				n++
			}
		}
		return n
	}

	// Refused: another site, another site's device, no scope.
	for name, tc := range map[string]struct {
		c   ironlinkv1.HealthServiceClient
		req *ironlinkv1.ReportHealthRequest
	}{
		"site B named":        {checker, &ironlinkv1.ReportHealthRequest{Site: "hdb", Events: []*ironlinkv1.HealthEvent{ev(b.UUID, "gpu-health-monitor", 0)}}},
		"site B's device":     {checker, &ironlinkv1.ReportHealthRequest{Site: "hda", Events: []*ironlinkv1.HealthEvent{ev(a.UUID, "gpu-health-monitor", 0), ev(b.UUID, "gpu-health-monitor", 1)}}},
		"operator, no scope":  {ironlinkv1.NewHealthServiceClient(id.dialAs(t, hubAddr, "ops-admin")), &ironlinkv1.ReportHealthRequest{Site: "hda", Events: []*ironlinkv1.HealthEvent{ev(a.UUID, "gpu-health-monitor", 0)}}},
		"site B by node name": {checker, &ironlinkv1.ReportHealthRequest{Site: "hdb", Events: []*ironlinkv1.HealthEvent{{NodeName: b.Name, Agent: "gpu-health-monitor", ComponentClass: "GPU", CheckName: "GpuXidError", IsFatal: true, GeneratedTime: timestamppb.Now()}}}},
	} {
		if _, err := tc.c.ReportHealth(ctx, tc.req); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: %v, want PermissionDenied", name, err)
		}
	}
	for _, d := range []string{a.UUID, b.UUID} {
		if n := healthOf(d); n != 0 {
			t.Fatalf("refused reports wrote %d health conditions on %s", n, d)
		}
	}

	// Accepted: the device of its own site turns FAULTED; a retry is a duplicate.
	req := &ironlinkv1.ReportHealthRequest{Site: "hda", Events: []*ironlinkv1.HealthEvent{ev(a.UUID, "gpu-health-monitor", 0)}}
	if _, err := checker.ReportHealth(ctx, req); err != nil {
		t.Fatalf("report for its own site: %v", err)
	}
	if d := getDevice(t, fc, a.UUID).GetDevice(); d.GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED || !strings.Contains(d.GetStatusReason(), "GpuXidError") {
		t.Fatalf("after the report: %v (%s), want FAULTED naming GpuXidError", d.GetStatus(), d.GetStatusReason())
	}
	if r, err := checker.ReportHealth(ctx, req); err != nil || !r.GetResults()[0].GetDuplicate() {
		t.Fatalf("the same batch again: %v %v, want a duplicate", r, err)
	}

	// A flood from one agent is throttled; the others still report.
	flooded := false
	for i := range 5 {
		var evs []*ironlinkv1.HealthEvent
		for j := range 10 {
			evs = append(evs, ev(devs["hda"][1].UUID, "flood", 10*i+j))
		}
		_, err := checker.ReportHealth(ctx, &ironlinkv1.ReportHealthRequest{Site: "hda", Events: evs})
		if status.Code(err) == codes.ResourceExhausted {
			flooded = true
			break
		}
		if err != nil {
			t.Fatalf("flood batch %d: %v", i, err)
		}
	}
	if !flooded {
		t.Fatal("50 events at once from one agent (burst 20, 1/s) were never refused")
	}
	other := ironlinkv1.NewHealthServiceClient(id.dialAs(t, hubAddr, "gpu-mon-a2"))
	for name, c := range map[string]ironlinkv1.HealthServiceClient{"another agent of the same checker": checker, "another checker": other} {
		agent := "quiet"
		if c == other {
			agent = "flood" // the same agent name, another client: its own bucket
		}
		var evs []*ironlinkv1.HealthEvent
		for j := range 10 {
			evs = append(evs, ev(devs["hda"][1].UUID, agent, 100+j))
		}
		if _, err := c.ReportHealth(ctx, &ironlinkv1.ReportHealthRequest{Site: "hda", Events: evs}); err != nil {
			t.Errorf("%s while one agent floods: %v", name, err)
		}
	}
}

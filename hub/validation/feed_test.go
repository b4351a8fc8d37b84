package validation_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// A validation run's start, every check result (the hub's
// hardware-profile once, not at every pass) and its verdict are in the
// change feed, in order, as FLEET_EVENT_KIND_VALIDATION.
func TestValidationRunInChangeFeed(t *testing.T) {
	f := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id := f.a.IDs[0]
	run := f.startRun(t, "site-a", id, "gpu-burn")
	f.inspected(t, f.a, id)
	f.runner.Pass(ctx)
	f.runner.Pass(ctx)
	if err := f.record(t, f.checkerA, run, "gpu-burn", false); err != nil {
		t.Fatal(err)
	}
	f.runner.Pass(ctx)

	stream, err := f.fleet.WatchFleet(ctx, &ironlinkv1.WatchFleetRequest{FromOldest: true,
		Kinds: []ironlinkv1.FleetEventKind{ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_VALIDATION}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "FAILED") }) {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("feed after %v: %v", got, err)
		}
		v := m.GetEvent().GetValidation()
		if v == nil {
			continue
		}
		if v.GetRunId() != run || v.GetDeviceId() != id || v.GetSite() != "site-a" || m.GetEvent().GetKind() != ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_VALIDATION {
			t.Fatalf("event %v, want run %s of %s", m.GetEvent(), run, id)
		}
		got = append(got, strings.Join(strings.Fields(v.GetEvent()+" "+v.GetCheck()+" "+v.GetResult()+" "+v.GetDetail()), " "))
	}
	want := []string{"STARTED", "RESULT hardware-profile PASS no hardware profile applies", "RESULT gpu-burn FAIL gpu-burn output", "FAILED failed: gpu-burn"}
	if !slices.Equal(got, want) {
		t.Fatalf("feed:\n%q\nwant\n%q", got, want)
	}
}

package remediation_test

import (
	"context"
	"strings"
	"testing"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/remediation"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/testlog"
)

const rackPolicy = `
policy:
  default:
    enabled: true
    guard: {maxDevices: 50, maxPercent: 100, window: 1h}
    remediation:
      maxInFlight: 2
      perLabel:
        - {label: rack, maxInFlight: 1}
    rules:
      - name: faulted
        to: [FAULTED]
        remediation:
          steps:
            - {action: REBOOT, timeout: 1m}
            - {action: REPROVISION, timeout: 1h}
          settle: 2m
          budget: {ladders: 2, window: 168h}
`

// A 20-device burst across 2 racks (labels from the labels file) with at
// most 2 remediations in flight per site and at most 1 per rack: no round
// ever has two steps in flight in one rack (checked on the recorded steps
// and the active operations), every device is eventually done (handed off
// after both steps), no step is repeated, and a ladder waiting for its
// rack says so in explain.
func TestBurstAtMostOnePerRack(t *testing.T) {
	r := newRig(t, rackPolicy, 20, false)
	ctx := context.Background()
	var entries []store.FileLabelEntry
	rack := map[string]string{}
	for i, id := range r.site.IDs {
		rack[id] = []string{"r1", "r2"}[i%2]
		entries = append(entries, store.FileLabelEntry{DeviceID: id, Labels: map[string]string{"rack": rack[id]}})
	}
	if err := r.st.ReplaceFileLabels(ctx, entries); err != nil {
		t.Fatal(err)
	}
	f, err := policy.Parse([]byte(rackPolicy))
	if err != nil {
		t.Fatal(err)
	}
	api := remediation.NewAPI(r.st, func() *policy.File { return f }, func(context.Context) string { return "alice" }, testlog.New(t))
	r.site.Fault(r.site.IDs, "DeployFailed", r.clk.Now())
	peak := map[string]int{}
	sawWait := false
	for round := 0; round < 80 && r.count(`SELECT count(*) FROM remediation_handoffs`) < 20; round++ {
		r.tick()
		// The recorded steps in flight, per rack.
		rows, err := r.st.Pool().Query(ctx, `SELECT l.device_id::text FROM remediation_steps s JOIN remediation_ladders l ON l.id = s.ladder_id
			WHERE s.state IN ('STARTING', 'RUNNING', 'SETTLING')`)
		if err != nil {
			t.Fatal(err)
		}
		flying := map[string]int{}
		total := 0
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			flying[rack[id]]++
			total++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if total > 2 || flying["r1"] > 1 || flying["r2"] > 1 {
			t.Fatalf("round %d: steps in flight %v (total %d): more than 1 per rack or 2 per site", round, flying, total)
		}
		for k, n := range flying {
			peak[k] = max(peak[k], n)
		}
		if active := r.count(`SELECT count(*) FROM operations WHERE state IN ('PENDING', 'RUNNING')`); active > 2 {
			t.Fatalf("round %d: %d operations active", round, active)
		}
		if !sawWait {
			var dev string
			err := r.st.Pool().QueryRow(ctx, `SELECT device_id::text FROM remediation_ladders WHERE state = 'RUNNING' AND waiting = $1 LIMIT 1`,
				remediation.WaitDomainInFlight).Scan(&dev)
			if err == nil {
				got, err := api.GetDeviceRemediation(ctx, &ironlinkv1.GetDeviceRemediationRequest{Device: dev})
				if err != nil {
					t.Fatal(err)
				}
				want := "waiting: MaxInFlightPerLabel (1 remediation in flight in rack=" + rack[dev] + " at site site-a (at most 1 per rack))"
				if !strings.Contains(got.GetPlan(), want) || got.GetLadderRun().GetWaiting() != remediation.WaitDomainInFlight {
					t.Fatalf("explain of a ladder waiting for its rack: plan %q, want it to contain %q", got.GetPlan(), want)
				}
				sawWait = true
			}
		}
		if _, err := r.st.Pool().Exec(ctx, `UPDATE operations SET state = 'FAILED', last_error = 'injected', ended_at = now()
			WHERE state IN ('PENDING', 'RUNNING')`); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.count(`SELECT count(*) FROM remediation_ladders WHERE state = 'HANDED_OFF'`); n != 20 {
		t.Fatalf("%d ladders done, want 20", n)
	}
	if peak["r1"] != 1 || peak["r2"] != 1 {
		t.Fatalf("peak per rack %v, want 1 each (both racks used at once)", peak)
	}
	if n := r.count(`SELECT count(*) FROM operations`); n != 40 {
		t.Fatalf("%d operations, want 40 (2 steps × 20, none repeated)", n)
	}
	if !sawWait {
		t.Fatal("no ladder waited for its rack")
	}
	if n := r.count(`SELECT count(*) FROM remediation_events WHERE event = 'WAITING' AND detail LIKE 'MaxInFlightPerLabel%'`); n == 0 {
		t.Fatal("no WAITING event names the per-rack limit")
	}
}

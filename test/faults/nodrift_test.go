package faults

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/test/harness"
)

// TestQuarantineAcrossLinkFailoverIsNotDrift: a quarantine is accepted,
// its first application fails (Ironic answers 500 to the node's trait
// read) and the hub backs off; meanwhile the site's link fails over to the
// other replica, whose resync applies the quarantine (first, because the
// command waits out its backoff); the resent command then finds it
// applied. Nobody changed OpenStack behind ironlink's back, so the device
// shows no drift correction. (Before the fix: drift_corrections 1,
// "resync: quarantine: node trait removed; …".)
func TestQuarantineAcrossLinkFailoverIsNotDrift(t *testing.T) { repeat(t, scenarioFailoverNoDrift) }

func scenarioFailoverNoDrift(t *testing.T) {
	db, pool := newDatabase(t)
	hubFlags := fastHub("--command-failure-backoff", "6s")
	a := harness.StartHub(t, bins, db, "hub-a", hubFlags...)
	b := harness.StartHub(t, bins, db, "hub-b", hubFlags...)
	s := newSite(t, "nodrift", 20)
	lb := newProxy(t, s.via(t, a.Addr))
	fc := harness.Fleet(t, b.Addr)
	s.startSatellite(t, "", lb.Addr())
	waitDevices(t, pool, s, 30*time.Second)

	target := s.readyNodes()[0]
	s.addNodeTrait(t, target)
	s.sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceBaremetal, Method: "GET",
		PathContains: "/v1/nodes/" + target + "/traits", Status: 500, Times: -1})
	cmd := quarantine(t, fc, target, "fault suite: failover", 10*time.Second)
	waitCommand(t, fc, cmd, ironlinkv1.CommandState_COMMAND_STATE_FAILED, 20*time.Second)
	s.sim.ClearFaults()
	resyncs := s.sat.Count(`msg="resync done"`)
	lb.SetBackends([]string{s.via(t, b.Addr)})
	lb.Cut()
	harness.Eventually(t, 30*time.Second, func() error {
		if r := linkReplica(pool, s.name); r != b.Replica {
			return errorf("link on %q, want %s", r, b.Replica)
		}
		return nil
	})
	c := waitCommand(t, fc, cmd, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 30*time.Second)
	t.Logf("command: %d attempts, detail %q", c.GetAttempts(), c.GetResultDetail())
	if !strings.Contains(c.GetResultDetail(), "node trait already absent") {
		t.Fatalf("the resent command removed the node trait itself (%q): the resync did not apply first", c.GetResultDetail())
	}
	// The satellite's own account of the resync on hub-b (the positive
	// sign: it ran) must count no correction; then none may be recorded.
	done := waitLogLines(t, s.sat, `msg="resync done"`, resyncs, 30*time.Second)
	if last := done[len(done)-1]; !strings.Contains(last, " corrected=0 ") {
		t.Errorf("the resync after the failover corrected something: %s", last)
	}
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT device_id::text, detail FROM drift_corrections`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, detail string
		if err := rows.Scan(&id, &detail); err != nil {
			t.Fatal(err)
		}
		t.Errorf("drift correction recorded for %s (%q) although nothing changed behind ironlink's back", id, detail)
	}
	var counted int
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(drift_corrections), 0) FROM devices`).Scan(&counted); err != nil {
		t.Fatal(err)
	}
	if counted != 0 {
		t.Errorf("devices show %d drift corrections, want 0", counted)
	}
	waitTruth(t, pool, s, 15*time.Second)
	s.checkLinkHistory(t, pool)
	checkCommands(t, pool, s)
}

// conditionRows is every device condition with its transition time, and
// the number of history rows, as the hub stores them.
type conditionRows struct {
	ltt     map[string]time.Time // device/type → last_transition_time
	history int
}

func readConditionRows(t *testing.T, pool *pgxpool.Pool) conditionRows {
	t.Helper()
	ctx := context.Background()
	out := conditionRows{ltt: map[string]time.Time{}}
	rows, err := pool.Query(ctx, `SELECT device_id::text, type, last_transition_time FROM device_conditions`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, typ string
		var ltt time.Time
		if err := rows.Scan(&id, &typ, &ltt); err != nil {
			t.Fatal(err)
		}
		out.ltt[id+"/"+typ] = ltt
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM condition_history`).Scan(&out.history); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRestartWithoutStateFileInventsNoTransitions: a site with a
// quarantined and a released (after a quarantine) device; the satellite
// is replaced without its state file while nothing changes in OpenStack.
// Once the new satellite has reported and resynced, the hub holds exactly
// the same condition history and every last_transition_time is
// unchanged. (Before the fix: two CustomerReady history rows per commanded
// device — TraitAbsent, then Quarantined again — and every
// last_transition_time reset to the restart.)
func TestRestartWithoutStateFileInventsNoTransitions(t *testing.T) {
	repeat(t, scenarioRestartNoTransitions)
}

func scenarioRestartNoTransitions(t *testing.T) {
	db, pool := newDatabase(t)
	hub := startHub(t, db, "hub-a")
	fc := harness.Fleet(t, hub.Addr)
	s := newSite(t, "restart", 20)
	sat := s.startSatellite(t, "#1", s.via(t, hub.Addr))
	waitDevices(t, pool, s, 30*time.Second)

	ready := s.readyNodes()
	q, r := ready[0], ready[1]
	s.addNodeTrait(t, q)
	s.addNodeTrait(t, r)
	waitCommand(t, fc, quarantine(t, fc, q, "fault suite: restart", 10*time.Second), ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 20*time.Second)
	waitCommand(t, fc, quarantine(t, fc, r, "fault suite: restart", 10*time.Second), ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 20*time.Second)
	waitCommand(t, fc, release(t, fc, r, "fault suite: restart", 10*time.Second), ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 20*time.Second)
	// Settled: CustomerReady says what was applied, and nothing moves.
	harness.Eventually(t, 20*time.Second, func() error {
		for id, want := range map[string]string{q: "Quarantined", r: "ReadyTraitPresent"} {
			d, err := fc.GetDevice(t.Context(), &ironlinkv1.GetDeviceRequest{DeviceId: id})
			if err != nil {
				return err
			}
			for _, c := range d.GetDevice().GetConditions() {
				if c.GetType() == "CustomerReady" && (c.GetReason() != want || c.GetObservedGeneration() != d.GetDevice().GetDesiredGeneration()) {
					return errorf("device %s CustomerReady %s gen %d", id, c.GetReason(), c.GetObservedGeneration())
				}
			}
		}
		return nil
	})
	settled(t, pool, s, sat)
	before := readConditionRows(t, pool)

	sat.Kill()
	if err := os.Remove(s.stateFile); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	sat2 := s.startSatellite(t, "#2", s.via(t, hub.Addr))
	// Reported (every device observed after the restart) and resynced.
	harness.Eventually(t, 30*time.Second, func() error {
		var stale int
		if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM devices WHERE site = $1 AND observed_at < $2`, s.name, restarted).Scan(&stale); err != nil {
			return err
		}
		if stale > 0 {
			return errorf("%d devices not observed since the restart", stale)
		}
		return nil
	})
	waitLogLines(t, sat2, `msg="resync done"`, 0, 30*time.Second)
	settled(t, pool, s, sat2) // the polls after the resync changed nothing, all committed

	after := readConditionRows(t, pool)
	if after.history != before.history {
		rows, err := pool.Query(t.Context(), `SELECT device_id::text, type, status, reason, observed_time FROM condition_history ORDER BY id DESC LIMIT $1`, after.history-before.history)
		if err == nil {
			for rows.Next() {
				var id, typ, st, reason string
				var at time.Time
				_ = rows.Scan(&id, &typ, &st, &reason, &at)
				t.Logf("new history row: %s %s %s/%s at %s", id, typ, st, reason, at.Format(time.RFC3339Nano))
			}
			rows.Close()
		}
		t.Errorf("the restart wrote %d condition history rows with nothing changed", after.history-before.history)
	}
	var moved []string
	for k, was := range before.ltt {
		if now, ok := after.ltt[k]; !ok || !now.Equal(was) {
			moved = append(moved, fmt.Sprintf("%s %s → %s", k, was.Format(time.RFC3339), now.Format(time.RFC3339)))
		}
	}
	if len(moved) > 0 {
		t.Errorf("the restart moved %d last_transition_times, e.g. %s", len(moved), strings.Join(lastN(moved, 3), "; "))
	}
	for _, id := range []string{q, r} {
		d, err := fc.GetDevice(t.Context(), &ironlinkv1.GetDeviceRequest{DeviceId: id})
		if err != nil {
			t.Fatal(err)
		}
		if n := d.GetDevice().GetDriftCorrections(); n != 0 {
			t.Errorf("device %s: %d drift corrections after a restart with nothing changed (%q)", id, n, d.GetDevice().GetLastDriftCorrection())
		}
	}
	checkCommands(t, pool, s)
}

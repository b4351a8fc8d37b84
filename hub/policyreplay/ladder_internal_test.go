package policyreplay

import (
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/remediation"
	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/internal/condition"
)

const simPolicy = `
policy:
  default:
    enabled: true
    remediation: {maxInFlight: 1}
    rules:
      - name: r
        to: [FAULTED]
        remediation:
          steps:
            - {action: REBOOT, timeout: 10m}
          settle: 5m
      - name: dry
        to: [FAULTED]
        reasons: [Dry]
        remediation:
          steps:
            - {action: REBOOT, timeout: 10m}
          dryRun: true
`

// The ladder replay's rules without a database: the site's maxInFlight
// makes a second ladder wait until the first step ends; a fault
// recommending CONTACT_SUPPORT is handed off at once; a quarantine
// released by someone else abandons its ladder; a step still faulty at its
// timeout exhausts a one-step ladder; a dry-run ladder replays nothing.
func TestLadderSimulation(t *testing.T) {
	f, err := policy.Parse([]byte(simPolicy))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	m := func(d time.Duration) time.Time { return t0.Add(d) }
	h := &history{siteOf: map[string]string{}, devices: map[string]int{"s": 10}, holds: map[string]holds{},
		statuses: map[string][]statusAt{
			// a: healthy again 2m after its quarantine: fixed at 7m.
			"a": {{m(0), status.Faulted}, {m(2 * time.Minute), status.Quarantined}, {m(8 * time.Minute), status.Available}},
			// b: waits for a's step (7m), then heals at 12m: fixed at 17m.
			"b": {{m(0), status.Faulted}, {m(12 * time.Minute), status.Quarantined}},
			// c: its fault recommends CONTACT_SUPPORT.
			"c": {{m(0), status.Faulted}},
			// d: released by an operator at 40m while its step runs.
			"d": {{m(30 * time.Minute), status.Faulted}, {m(40 * time.Minute), status.Available}},
			// e: faulty past its step's timeout.
			"e": {{m(50 * time.Minute), status.Faulted}},
			"x": {{m(0), status.Faulted}},
		},
		conds: map[string][]condRow{"c": {{typ: "health.GPU/GpuXidError", status: string(condition.False), at: m(0),
			health: &condition.Health{Fatal: true, RecommendedAction: 5}}}},
		inputs: inputs{closes: map[string][]time.Time{}, priorLadders: map[string][]time.Time{}},
	}
	hs := []hold{{"a", "s", "r", 1, m(0)}, {"b", "s", "r", 2, m(0)}, {"c", "s", "r", 3, m(90 * time.Minute)},
		{"d", "s", "r", 4, m(30 * time.Minute)}, {"e", "s", "r", 5, m(50 * time.Minute)}, {"x", "s", "dry", 6, m(0)}}
	h.statuses["c"][0].at = m(90 * time.Minute)
	h.conds["c"][0].at = m(90 * time.Minute)
	got := map[string]Remediation{}
	for _, r := range ladders(f, h, hs, nil, m(100*time.Minute)) {
		got[r.DeviceID] = r
	}
	if a := got["a"]; a.Outcome != OutcomeFixed || !a.Released || a.EndedAt != m(7*time.Minute) || len(a.Steps) != 1 {
		t.Errorf("a: %+v, want fixed and released at 7m", a)
	}
	if b := got["b"]; b.Outcome != OutcomeFixed || len(b.Steps) != 1 || b.Steps[0].StartedAt != m(7*time.Minute) || b.EndedAt != m(17*time.Minute) {
		t.Errorf("b: %+v, want its step started at 7m (maxInFlight 1), fixed at 17m", b)
	}
	if c := got["c"]; c.Outcome != OutcomeHandedOff || c.Handoff != "RecommendedAction" || len(c.Steps) != 0 {
		t.Errorf("c: %+v, want handed off at once (RecommendedAction)", c)
	}
	if d := got["d"]; d.Outcome != OutcomeAbandoned || d.EndedAt != m(40*time.Minute) || d.Steps[0].Result != StepRunning {
		t.Errorf("d: %+v, want abandoned at 40m, its step unfinished", d)
	}
	if e := got["e"]; e.Outcome != OutcomeHandedOff || e.Handoff != "LadderExhausted" || len(e.Steps) != 1 || e.Steps[0].Result != StepFailed ||
		e.EndedAt.Before(m(60*time.Minute)) {
		t.Errorf("e: %+v, want its step failed after the 10m timeout and the ladder exhausted", e)
	}
	if x, ok := got["x"]; ok {
		t.Errorf("x (dry-run ladder): %+v, want nothing replayed", x)
	}
	if got, want := len(got), 5; got != want {
		t.Errorf("%d remediations, want %d", got, want)
	}
}

// A ladder that has not ended by the period's end is RUNNING, and one
// waiting for a slot says why.
func TestLadderRunningAtTheEnd(t *testing.T) {
	f, err := policy.Parse([]byte(simPolicy))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	h := &history{siteOf: map[string]string{}, devices: map[string]int{"s": 10}, holds: map[string]holds{},
		statuses: map[string][]statusAt{"a": {{t0, status.Faulted}}, "b": {{t0, status.Faulted}}},
		inputs:   inputs{closes: map[string][]time.Time{}, priorLadders: map[string][]time.Time{}}}
	rs := ladders(f, h, []hold{{"a", "s", "r", 1, t0}, {"b", "s", "r", 2, t0}}, nil, t0.Add(5*time.Minute))
	if len(rs) != 2 || rs[0].Outcome != OutcomeRunning || rs[0].Steps[0].Result != StepRunning ||
		rs[1].Outcome != OutcomeRunning || len(rs[1].Steps) != 0 || rs[1].Waiting != remediation.WaitMaxInFlight {
		t.Errorf("remediations %+v, want a's step running and b waiting (MaxInFlight)", rs)
	}
}

// The budget counts the ladders recorded before the period: a device with
// budget.ladders of them in the window is handed off (BudgetSpent), one
// whose earlier ladder left the window gets a ladder.
func TestLadderBudgetCountsEarlierLadders(t *testing.T) {
	f, err := policy.Parse([]byte(`
policy:
  default:
    enabled: true
    rules:
      - name: r
        to: [FAULTED]
        remediation:
          steps: [{action: REBOOT, timeout: 10m}]
          budget: {ladders: 1, window: 24h}
`))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	h := &history{siteOf: map[string]string{}, devices: map[string]int{"s": 10}, holds: map[string]holds{},
		statuses: map[string][]statusAt{"a": {{t0, status.Faulted}}, "b": {{t0, status.Faulted}}},
		inputs: inputs{closes: map[string][]time.Time{}, priorLadders: map[string][]time.Time{
			"a": {t0.Add(-time.Hour)}, "b": {t0.Add(-25 * time.Hour)}}}}
	rs := ladders(f, h, []hold{{"a", "s", "r", 1, t0}, {"b", "s", "r", 2, t0}}, nil, t0.Add(time.Minute))
	if len(rs) != 2 || rs[0].Outcome != OutcomeHandedOff || rs[0].Handoff != "BudgetSpent" || len(rs[0].Steps) != 0 ||
		rs[1].Outcome != OutcomeRunning || len(rs[1].Steps) != 1 {
		t.Errorf("remediations %+v, want a handed off (budget spent by an earlier ladder), b's ladder running", rs)
	}
}

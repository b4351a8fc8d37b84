package policyreplay

import (
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/status"
)

const releasePolicy = `
policy:
  default:
    enabled: true
    guard: {maxDevices: 10, maxPercent: 100, window: 1h}
    remediation: {maxInFlight: 5}
    rules:
      - name: r
        to: [FAULTED]
        autoReleaseAfter: 5m
`

// A rule's autoReleaseAfter in the replay: device a, quarantined at 0 and
// healthy (QUARANTINED) from 2m, is released by the policy at 7m; its
// next fault (20m) is decided
// again (not "already quarantined"); the release counts in the day's
// releases. Device b faults again at 4m, before its delay ran out: not
// released.
func TestReplayAutoReleaseAfter(t *testing.T) {
	f, err := policy.Parse([]byte(releasePolicy))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	m := func(d time.Duration) time.Time { return t0.Add(d) }
	trig := func(dev string, id int64, from status.Status, at time.Time) trigger {
		return trigger{Trigger: policy.Trigger{DeviceID: dev, HistoryID: id, From: from, To: status.Faulted, CauseType: "ProvisioningHealthy",
			CauseReason: "DeployFailed", CauseSince: at, ChangedAt: at}, site: "s", lastFree: m(-time.Hour)}
	}
	h := &history{siteOf: map[string]string{"a": "s", "b": "s"}, devices: map[string]int{"s": 10}, holds: map[string]holds{},
		statuses: map[string][]statusAt{
			"a": {{m(-time.Hour), status.Available}, {m(0), status.Faulted}, {m(2 * time.Minute), status.Quarantined}, {m(20 * time.Minute), status.Faulted}},
			"b": {{m(-time.Hour), status.Available}, {m(0), status.Faulted}, {m(2 * time.Minute), status.Quarantined}, {m(4 * time.Minute), status.Faulted}},
		},
		triggers: []trigger{trig("a", 1, status.Available, m(0)), trig("b", 2, status.Available, m(0)), trig("a", 3, status.Quarantined, m(20*time.Minute))},
		inputs:   inputs{closes: map[string][]time.Time{}, priorLadders: map[string][]time.Time{}},
	}
	rep := run(f, h, m(time.Hour))
	if len(rep.AutoReleases) != 1 || rep.AutoReleases[0].DeviceID != "a" || !rep.AutoReleases[0].At.Equal(m(7*time.Minute)) ||
		!rep.AutoReleases[0].ClearedSince.Equal(m(2*time.Minute)) {
		t.Fatalf("auto releases %+v, want a at 7m (cleared since 2m)", rep.AutoReleases)
	}
	for _, d := range rep.Decisions {
		if d.TriggerID == 3 && d.Reason == policy.ReasonAlreadyImpaired {
			t.Errorf("a's fault at 20m: %+v, want it decided (the policy released a at 7m)", d)
		}
	}
	releases := 0
	for _, d := range rep.Days {
		releases += d.Releases
	}
	if releases != 1 {
		t.Errorf("days %+v: %d releases, want 1", rep.Days, releases)
	}
}

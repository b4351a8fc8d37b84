package faults

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/test/faults/satsim"
)

// TestSatelliteClocksOffByTenMinutes runs two scripted sites whose clocks
// are 10 minutes ahead and 10 minutes behind the hub's, streaming deltas.
// Every change must be committed exactly once for both (the ahead site's
// times are replaced by the hub's receive time, so they never freeze a
// condition; the behind site's are stored as sent); no stored time may lie
// beyond the hub's clock skew tolerance; neither site goes UNREACHABLE
// (liveness is measured by the hub's clock); and the hub warns once per
// link about each wrong clock.
func TestSatelliteClocksOffByTenMinutes(t *testing.T) { repeat(t, scenarioClocks) }

func scenarioClocks(t *testing.T) {
	db, pool := newDatabase(t)
	hub := startHub(t, db, "hub-a", "--stale-after", "5s")
	ahead := satsim.New(satsim.Config{Site: "clock-ahead", Addr: hub.Addr, Devices: 20, DevicesPerBatch: 5, ClockOffset: 10 * time.Minute, Logf: t.Logf})
	behind := satsim.New(satsim.Config{Site: "clock-behind", Addr: hub.Addr, Devices: 20, DevicesPerBatch: 5, ClockOffset: -10 * time.Minute, Logf: t.Logf})
	runSats(t, ahead, behind)
	for _, s := range []*satsim.Sat{ahead, behind} {
		s.Produce(true)
	}
	time.Sleep(8 * time.Second) // longer than stale-after
	drainAndVerify(t, pool, 30*time.Second, ahead, behind)

	ctx := context.Background()
	var future int
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM devices WHERE observed_at > now() + make_interval(secs => $1)) +
		(SELECT count(*) FROM device_conditions WHERE observed_time > now() + make_interval(secs => $1)
			OR last_transition_time > now() + make_interval(secs => $1)) +
		(SELECT count(*) FROM condition_history WHERE observed_time > now() + make_interval(secs => $1))`,
		store.MaxClockSkew.Seconds()).Scan(&future); err != nil {
		t.Fatal(err)
	}
	if future != 0 {
		t.Errorf("%d stored times lie beyond the clock skew tolerance", future)
	}
	var unreachable int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM devices WHERE status = 'UNREACHABLE'`).Scan(&unreachable); err != nil {
		t.Fatal(err)
	}
	if unreachable != 0 {
		t.Errorf("%d devices UNREACHABLE although both sites kept reporting", unreachable)
	}
	out := hub.Output()
	for _, want := range []struct{ site, text string }{
		{"clock-ahead", "satellite clock ahead by about 10m0s"},
		{"clock-ahead", "satellite clock ahead by 10m0s"},
		{"clock-behind", "satellite clock behind by about 10m0s"},
	} {
		n := 0
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, want.text) && strings.Contains(line, "site="+want.site) {
				n++
			}
		}
		if links := map[string]int{"clock-ahead": ahead.Stats().Links, "clock-behind": behind.Stats().Links}[want.site]; n != links {
			t.Errorf("site %s: %d warnings %q for %d links, want one per link", want.site, n, want.text, links)
		}
	}
}

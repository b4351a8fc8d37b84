package faults

import (
	"bufio"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/test/harness"
)

// ironicDelay is how long every Ironic request waits in the slow-Ironic
// scenario.
const ironicDelay = 10 * time.Second

// TestIronicAnswersInTenSeconds: every Ironic request of a site takes 10 s
// for 40 s, against a satellite polling every second. Each poll is
// abandoned at its timeout (the poll interval) and polls never overlap, the
// satellite's goroutines do not pile up, it does not exit, and a
// quarantine asked meanwhile SUCCEEDS; once Ironic is fast again the hub's
// conditions equal the simulator's truth.
func TestIronicAnswersInTenSeconds(t *testing.T) { repeat(t, scenarioSlowIronic) }

func scenarioSlowIronic(t *testing.T) {
	db, pool := newDatabase(t)
	hub := startHub(t, db, "hub-a")
	fc := harness.Fleet(t, hub.Addr)
	s := newSite(t, "slowironic", 30)
	metrics := harness.FreeAddr(t)
	sat := s.startSatellite(t, "", hub.Addr, "--metrics-addr", metrics)
	waitDevices(t, pool, s, 30*time.Second)
	target := s.readyNodes()[0]
	s.addNodeTrait(t, target)

	var mu sync.Mutex
	var listings []time.Time
	s.sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceBaremetal, Method: "GET", PathContains: "/v1/nodes?", Times: -1, Delay: ironicDelay,
		Before: func() { mu.Lock(); listings = append(listings, time.Now()); mu.Unlock() }})
	s.sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceBaremetal, Times: -1, Delay: ironicDelay})
	slowFrom := time.Now()
	time.Sleep(ironicDelay + 5*time.Second) // the first slow answers are in
	early := goroutines(t, metrics)
	cmd := quarantine(t, fc, target, "fault suite: slow Ironic", 10*time.Second)
	waitCommand(t, fc, cmd, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 90*time.Second)
	t.Logf("quarantine SUCCEEDED with every Ironic request taking %s", ironicDelay)
	time.Sleep(time.Until(slowFrom.Add(40 * time.Second)))
	late := goroutines(t, metrics)
	s.sim.ClearFaults()
	t.Logf("satellite goroutines %d → %d over the slow period", early, late)
	if late > early+10 {
		t.Errorf("satellite goroutines grew from %d to %d while Ironic was slow", early, late)
	}
	if sat.Exited() {
		t.Fatalf("satellite exited: %v", sat.ExitErr())
	}
	mu.Lock()
	starts := slices.Clone(listings)
	mu.Unlock()
	if len(starts) < 2 {
		t.Fatalf("only %d listing requests in 40 s", len(starts))
	}
	// A poll is bounded by its timeout (the poll interval, 1 s here): each
	// listing request is abandoned at that bound, and the next poll starts
	// no earlier. Two listing requests less than 0.9 s apart would be polls
	// overlapping.
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < 900*time.Millisecond {
			t.Errorf("listing request %d started %s after the one before: polls overlap", i, gap.Round(time.Millisecond))
		}
	}
	t.Logf("%d listing requests in the slow period, each abandoned at the poll timeout, none overlapping; polls skipped (satellite log): %d",
		len(starts), sat.Count("poll skipped; conditions unchanged"))
	waitTruth(t, pool, s, 60*time.Second)
}

// goroutines reads go_goroutines from a satellite's /metrics.
func goroutines(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int(n)
		}
	}
	t.Fatal("no go_goroutines in the satellite's metrics")
	return 0
}

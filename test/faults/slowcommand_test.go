package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/test/harness"
)

// TestSlowCommandIsNotAppliedTwice: applying a quarantine takes longer than
// the hub's --command-resend-after because Placement keeps answering 409
// (a satellite retries a conflict for up to 8 rounds, and a 503 for up to
// 45 s, per write). The hub sends the command again while the first
// application is still running — the test holds the first provider write
// until the hub has resent (the command's attempts reach 2), so the resend
// always happens; the satellite must not queue a second application of the
// same command behind the first: when the first ends FAILED, the hub's
// failure backoff (3 s doubled per attempt: 12 s after 3 sends) must hold —
// no provider write between the failure and the hub's next attempt, which
// the test waits for (less a second: the hub records a send after it).
func TestSlowCommandIsNotAppliedTwice(t *testing.T) { repeat(t, scenarioSlowCommand) }

func scenarioSlowCommand(t *testing.T) {
	db, pool := newDatabase(t)
	hub := startHub(t, db, "hub-a", "--command-resend-after", "2s", "--command-failure-backoff", "3s")
	fc := harness.Fleet(t, hub.Addr)
	s := newSite(t, "slowcmd", 20)
	s.startSatellite(t, "", hub.Addr)
	waitDevices(t, pool, s, 30*time.Second)
	dev := s.readyNodes()[0]
	path := "/resource_providers/" + dev + "/traits"
	held := make(chan struct{})
	release := sync.OnceFunc(func() { close(held) })
	t.Cleanup(release) // a test that fails early must not leave Placement blocked
	var mu sync.Mutex
	var puts []time.Time // when each provider write of dev reached Placement
	s.sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServicePlacement, Method: "PUT", PathContains: path, Status: 409, Times: -1,
		Before: func() {
			<-held
			mu.Lock()
			puts = append(puts, time.Now())
			mu.Unlock()
			_ = s.sim.BumpProviderGeneration(dev)
		}})
	c := quarantine(t, fc, dev, "fault suite: slow command", 10*time.Second)
	attempts := func() (int, time.Time, error) {
		var n int
		var sent time.Time
		err := pool.QueryRow(context.Background(), `SELECT attempts, sent_at FROM commands WHERE id = $1`, c).Scan(&n, &sent)
		return n, sent, err
	}
	harness.Eventually(t, 30*time.Second, func() error {
		if n, _, err := attempts(); err != nil || n < 2 {
			return fmt.Errorf("the hub has sent the command %d times (%v), want a resend while its first application is held", n, err)
		}
		return nil
	})
	release()
	failed := waitCommand(t, fc, c, ironlinkv1.CommandState_COMMAND_STATE_FAILED, 30*time.Second)
	failedSeen := time.Now()
	// The positive sign first: the hub's next attempt after its backoff;
	// then the negative: no provider write between the failure and it.
	var retried time.Time
	harness.Eventually(t, 30*time.Second, func() error {
		n, sent, err := attempts()
		if err != nil || n <= int(failed.GetAttempts()) {
			return fmt.Errorf("the hub has not attempted the failed command again (%d attempts, %v)", n, err)
		}
		retried = sent
		return nil
	})
	mu.Lock()
	early := 0
	for _, at := range puts {
		if at.After(failedSeen) && at.Before(retried.Add(-time.Second)) {
			early++
		}
	}
	mu.Unlock()
	if early > 0 {
		t.Errorf("%d provider writes between the command failing (attempts %d) and the hub's next attempt %s later: "+
			"the command was applied again behind the first application", early, failed.GetAttempts(), retried.Sub(failedSeen).Round(time.Millisecond))
	}
	s.sim.ClearFaults()
	waitCommand(t, fc, c, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 30*time.Second)
	checkCommands(t, pool, s)
}

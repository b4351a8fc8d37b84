package faults

import (
	"context"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

// TestQuarantineDuringIngest quarantines and releases devices of a site
// while that site's link commits batches as fast as it can. Every operator
// call must succeed and no link may be dropped: a quarantine must not
// deadlock with a batch of the same site (ApplyBatch locks the site row FOR
// UPDATE and then the device rows; SetDesiredImpairment locks a device row
// and then, through the commands.site foreign key, needs a KEY SHARE lock
// on the same site row).
func TestQuarantineDuringIngest(t *testing.T) { repeat(t, scenarioDeadlock) }

func scenarioDeadlock(t *testing.T) {
	db, pool := newDatabase(t)
	hub := startHub(t, db, "hub-a", "--log-level", "info")
	fc := harness.Fleet(t, hub.Addr)
	sat := satsim.New(satsim.Config{Site: "ingest", Addr: hub.Addr, Devices: 8, DevicesPerBatch: 8, Window: 4})
	runSats(t, sat)
	harness.Eventually(t, 20*time.Second, func() error {
		if st := sat.Stats(); st.LastAcked < 1 {
			return errorf("snapshot not acked")
		}
		return nil
	})
	sat.Produce(true)
	devs := sat.Devices()
	failures := 0
	deadline := time.Now().Add(8 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var err error
		if i%2 == 0 {
			_, err = fc.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: devs[i%len(devs)], Reason: "fault suite: ingest"})
		} else {
			_, err = fc.ReleaseDevice(ctx, &ironlinkv1.ReleaseDeviceRequest{DeviceId: devs[(i-1)%len(devs)], Reason: "fault suite: ingest"})
		}
		cancel()
		if err != nil {
			failures++
			if failures <= 3 {
				t.Errorf("operator call %d failed during ingest: %v", i, err)
			}
		}
	}
	drainAndVerify(t, pool, 30*time.Second, sat)
	if st := sat.Stats(); st.Links != 1 {
		t.Errorf("the link was dropped %d times during ingest: %v", st.Links-1, lastN(sat.LinkErrors(), 3))
	}
	if failures > 0 {
		t.Errorf("%d operator calls failed; hub log: %v", failures, hub.Lines("deadlock detected")[:min(2, len(hub.Lines("deadlock detected")))])
	}
}

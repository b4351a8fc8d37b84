package operations_test

import (
	"context"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
	"github.com/ironlink/ironlink/satellite/operations"
)

type simHold struct{ c *openstacksim.Cloud }

func (s simHold) holdCleanWait(on bool) { s.c.HoldWaitStates(on) }

func (s simHold) failNextAdoption(uuid, err string) { s.c.FailNextAdoption(uuid, err) }

// TestOperationsSimulator runs the suite against openstacksim, whose
// transitions step every 20 ms and can be held in a wait state.
func TestOperationsSimulator(t *testing.T) {
	sim, cfg := ostest.StartSim(t, openstacksim.Options{ProvisionStep: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := openstack.Connect(ctx, cfg, ostest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	ocfg := cfg
	ocfg.Nova, ocfg.WrapTransport = openstack.NovaOn, rec.wrap
	oc, _, err := operations.Connect(ctx, ocfg, ostest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{name: "sim", clients: oc, rec: rec, admin: admin, nova: true, image: "testbed-image",
		poll: 20 * time.Millisecond, timeout: 30 * time.Second,
		goodStep:     &ironlinkv1.CleanStep{Interface: "deploy", Step: "erase_devices_metadata"},
		waitsInClean: true, sim: simHold{sim}}
	runSuite(t, e)
}

// Package ironictest holds the real-cloud test steps that more than one
// suite takes against an Ironic (the satellite's agent tests and the
// end-to-end suite in test/e2e): running the test bed's seed scripts and
// inspecting a node until Ironic records a new inspection. Test code only.
package ironictest

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/ironlink/ironlink/satellite/ironic"
)

// RunSeed runs a test bed seed script (its path, then its arguments),
// failing t with the script's output when it exits non-zero.
func RunSeed(t testing.TB, seed string, args ...string) {
	t.Helper()
	if out, err := exec.Command(seed, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", seed, args, err, out)
	}
}

// Inspect waits for node id to rest in enroll, moves it to manageable
// ("manage") and inspects it ("inspect"), returning once its
// inspection_finished_at differs from what it was before, polling every
// 500 ms. It fails t on an Ironic error or when ctx ends first.
func Inspect(ctx context.Context, t testing.TB, ir *ironic.Client, id string) {
	t.Helper()
	wait := func(state string) ironic.Node {
		for {
			n, err := ir.GetNode(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if n.ProvisionState == state && n.TargetProvisionState == "" {
				return n
			}
			select {
			case <-ctx.Done():
				t.Fatalf("node %s never reached %s (at %s)", id, state, n.ProvisionState)
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	wait("enroll")
	if err := ir.SetProvisionState(ctx, id, "manage", nil); err != nil {
		t.Fatal(err)
	}
	before := wait("manageable").InspectionFinishedAt
	if err := ir.SetProvisionState(ctx, id, "inspect", nil); err != nil {
		t.Fatal(err)
	}
	for n := wait("manageable"); n.InspectionFinishedAt.Equal(before); n = wait("manageable") {
		time.Sleep(500 * time.Millisecond)
	}
}

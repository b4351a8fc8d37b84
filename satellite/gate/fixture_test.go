package gate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ironlink/ironlink/satellite/gate"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/site"
)

// The gate's failure policy, over the in-memory site: a quarantine closes
// the provider even when the node write fails (fail-closed); a release
// leaves the provider closed when the node write fails; a repeated Apply
// writes nothing.
func TestApplyPolicyOverFixture(t *testing.T) {
	ctx := context.Background()
	const tr = gate.DefaultTrait
	for _, tc := range []struct {
		name        string
		quarantine  bool
		nodeFails   bool
		wantErr     bool
		wantNode    bool // trait on the node afterwards
		wantProv    bool // trait on the provider afterwards
		wantChanges int
	}{
		{name: "quarantine", quarantine: true, wantChanges: 2},
		{name: "quarantine, node write fails: provider closed anyway", quarantine: true, nodeFails: true, wantErr: true, wantNode: true, wantChanges: 1},
		{name: "release", wantNode: true, wantProv: true, wantChanges: 2},
		{name: "release, node write fails: provider left closed", nodeFails: true, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := site.NewFixture()
			f.DefineTrait(tr)
			var traits []string
			if tc.quarantine {
				traits = []string{tr}
			}
			f.PutNode(ironic.Node{UUID: "n1", Traits: traits})
			f.PutProvider("n1", traits...)
			if tc.nodeFails {
				f.Fail(site.MethodRemoveTrait, "n1", ironic.ErrNodeLocked, -1)
				f.Fail(site.MethodAddTrait, "n1", ironic.ErrNodeLocked, -1)
			}
			a := &gate.Applier{Ironic: f, Placement: f}
			_, err := a.Apply(ctx, "n1", tc.quarantine)
			if (err != nil) != tc.wantErr || (tc.wantErr && !errors.Is(err, ironic.ErrNodeLocked)) {
				t.Fatalf("Apply: %v, want error %v", err, tc.wantErr)
			}
			n, _ := f.Node("n1")
			pt, _ := f.Provider("n1")
			if n.HasTrait(tr) != tc.wantNode || contains(pt, tr) != tc.wantProv {
				t.Errorf("node %v provider %v; want node %v provider %v", n.Traits, pt, tc.wantNode, tc.wantProv)
			}
			if got := f.Changes("n1"); got != tc.wantChanges {
				t.Errorf("%d changes, want %d (%v)", got, tc.wantChanges, f.Calls())
			}
			if tc.wantErr {
				return
			}
			f.ResetCalls()
			r, err := a.Apply(ctx, "n1", tc.quarantine)
			if err != nil || r.NodeChanged || r.ProviderChanged || len(f.Writes()) != 0 {
				t.Errorf("repeated Apply: %+v, %v, writes %v", r, err, f.Writes())
			}
		})
	}
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

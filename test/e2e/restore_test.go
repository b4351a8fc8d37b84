package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

// TestReleaseRestoresSimulator is issue 25's round trip on real processes:
// a HELD (healthy, trait absent), an AVAILABLE and an IN_SERVICE device
// are quarantined, the bulk release is previewed (counted per outcome) and
// made, and each device ends where it began, the trait on the simulator's
// Ironic node and Placement provider included. The HELD device is then
// offered, explicitly.
func TestReleaseRestoresSimulator(t *testing.T) {
	ctx := context.Background()
	c := simCloud(t)
	db := pgtest.NewDatabase(t)
	const site = "e2e"
	id := newIdentity(t, []string{site}, map[string][]string{"ops-admin": {auth.ScopeOperationsRead, auth.ScopeOperationsWrite}})
	hubAddr, _ := startHub(t, db, id)
	harness.Start(t, "ironlink-satellite", bins.Satellite(), append([]string{"--site", site, "--hub", hubAddr, "--clouds-yaml", c.cloudsYAML,
		"--cloud", c.name, "--poll-interval", "2s", "--max-backoff", "2s", "--resync-interval", "3s", "--auth-backoff", "1s"}, id.satelliteArgs(site)...)...)
	conn := id.dialAs(t, hubAddr, "ops-admin")
	fc, bc := ironlinkv1.NewFleetServiceClient(conn), ironlinkv1.NewBulkServiceClient(conn)

	projects := c.serverProjects(t)
	begin := map[string]ironlinkv1.OperationalStatus{}
	var ids []string
	for _, want := range []ironlinkv1.OperationalStatus{ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_HELD,
		ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE, ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_IN_SERVICE} {
		for _, n := range c.nodes(t) {
			if expectedStatus(n, c.rpTraits(t, n.UUID), projects) == want {
				ids, begin[n.UUID] = append(ids, n.UUID), want
				break
			}
		}
	}
	if len(ids) != 3 {
		t.Fatalf("the simulator has no HELD, AVAILABLE and IN_SERVICE node each: %v", begin)
	}
	traits := func(id string) (node, provider bool) {
		return slices.Contains(c.nodeTraits(t, id), readyTrait), slices.Contains(c.rpTraits(t, id), readyTrait)
	}
	// Offered: the provider has the trait (CustomerReady; the seeded nodes
	// may lack the node trait, which the satellite writes on a release).
	offered := map[string]bool{}
	var nOffered int32
	for _, id := range ids {
		_, p := traits(id)
		offered[id] = p
		if p {
			nOffered++
		}
		harness.Eventually(t, 60*time.Second, func() error {
			r, err := fc.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: id})
			if err != nil {
				return err // not reported yet
			}
			if st := r.GetDevice().GetStatus(); st != begin[id] {
				return fmt.Errorf("device %s is %v, want %v", id, st, begin[id])
			}
			return nil
		})
	}
	if offered[ids[0]] || !offered[ids[1]] {
		t.Fatalf("trait before: %v (want the HELD device without it, the AVAILABLE one with it)", offered)
	}

	for _, id := range ids {
		r, err := fc.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: id, Reason: "round trip"})
		if err != nil {
			t.Fatal(err)
		}
		waitCommand(t, fc, r.GetCommand().GetCommandId(), ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED)
		if n, p := traits(id); n || p {
			t.Fatalf("quarantined device %s still has the trait (node %v, provider %v)", id, n, p)
		}
	}

	sel := &ironlinkv1.DeviceSelector{Site: site, Statuses: []ironlinkv1.OperationalStatus{ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_QUARANTINED}}
	var prev *ironlinkv1.PreviewBulkImpairmentResponse
	harness.Eventually(t, 30*time.Second, func() error {
		var err error
		if prev, err = bc.PreviewBulkImpairment(ctx, &ironlinkv1.PreviewBulkImpairmentRequest{Selector: sel}); err != nil {
			return err
		}
		if prev.GetCount() != 3 {
			return fmt.Errorf("preview matches %d devices, want the 3 quarantined", prev.GetCount())
		}
		return nil
	})
	counts := map[ironlinkv1.ReleaseOutcome]int32{}
	for _, rc := range prev.GetReleaseCounts() {
		counts[rc.GetOutcome()] += rc.GetCount()
	}
	if counts[ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_RESTORED_OFFERED] != nOffered || counts[ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_RESTORED_NOT_OFFERED] != 3-nOffered {
		t.Fatalf("preview counts %v, want %d offered again, %d not offered", counts, nOffered, 3-nOffered)
	}
	rel, err := bc.BulkRelease(ctx, &ironlinkv1.BulkReleaseRequest{Selector: sel, Reason: "round trip", ExpectedCount: 3})
	if err != nil || len(rel.GetCommands()) != 3 {
		t.Fatalf("bulk release %v %v", rel, err)
	}
	for _, cm := range rel.GetCommands() {
		waitCommand(t, fc, cm.GetCommandId(), ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED)
	}
	for _, id := range ids {
		harness.Eventually(t, 60*time.Second, func() error {
			if st := getDevice(t, fc, id).GetDevice().GetStatus(); st != begin[id] {
				return fmt.Errorf("released device %s is %v, want %v as before the quarantine", id, st, begin[id])
			}
			return nil
		})
		if n, p := traits(id); p != offered[id] || (offered[id] && !n) || (!offered[id] && n) {
			t.Fatalf("released device %s (%v before): trait on node %v, provider %v; want %v", id, begin[id], n, p, offered[id])
		}
	}

	// Applied, and resynced every 3 s: the HELD device's trait stays absent.
	held := ids[0]
	harness.Eventually(t, 30*time.Second, func() error {
		d := getDevice(t, fc, held).GetDevice()
		if d.GetAppliedGeneration() != d.GetDesiredGeneration() {
			return fmt.Errorf("applied generation %d of %d", d.GetAppliedGeneration(), d.GetDesiredGeneration())
		}
		return nil
	})
	if n, p := traits(held); n || p {
		t.Fatalf("the released HELD device got the trait (node %v, provider %v)", n, p)
	}

	// Offering is its own recorded action.
	if _, err := fc.OfferDevice(ctx, &ironlinkv1.OfferDeviceRequest{DeviceId: held, Reason: "validated", ValidateOnly: true}); err != nil {
		t.Fatal(err)
	}
	if n, _ := traits(held); n {
		t.Fatal("a validate-only offer added the trait")
	}
	off, err := fc.OfferDevice(ctx, &ironlinkv1.OfferDeviceRequest{DeviceId: held, Reason: "validated"})
	if err != nil || off.GetCommand().GetAction() != ironlinkv1.ImpairmentAction_IMPAIRMENT_ACTION_OFFER {
		t.Fatalf("offer %v %v", off, err)
	}
	waitCommand(t, fc, off.GetCommand().GetCommandId(), ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED)
	if n, p := traits(held); !n || !p {
		t.Fatalf("offered device: trait on node %v, provider %v", n, p)
	}
	harness.Eventually(t, 60*time.Second, func() error {
		if st := getDevice(t, fc, held).GetDevice().GetStatus(); st != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE {
			return fmt.Errorf("offered device is %v", st)
		}
		return nil
	})
	h := getDevice(t, fc, held).GetImpairmentHistory()
	if len(h) < 3 || h[0].GetAction() != ironlinkv1.ImpairmentAction_IMPAIRMENT_ACTION_OFFER || h[1].GetAction() != ironlinkv1.ImpairmentAction_IMPAIRMENT_ACTION_RELEASE ||
		h[1].GetDesired() != ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED_UNOFFERED {
		t.Fatalf("history %v", h)
	}
}

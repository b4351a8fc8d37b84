package agent_test

import (
	"context"
	"testing"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/textcheck"
	"github.com/ironlink/ironlink/satellite/conditions"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/site"
)

// A command re-reads only the node it changed (one GET of the node, one
// of its provider's traits), never the site's listing, and the update it
// pushes carries the new CustomerReady; a release after it the same way.
func TestCommandRereadsOnlyItsNode(t *testing.T) {
	ctx := context.Background()
	s := newFixtureSite(t, 5, false)
	s.poll(t)
	id := s.ids[2]
	for _, step := range []struct {
		desired ironlinkv1.ImpairmentState
		gen     int64
		status  ironlinkv1.ConditionStatus
		reason  string
	}{
		{ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED, 1, ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE, conditions.ReasonQuarantined},
		{ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED, 2, ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE, conditions.ReasonReadyTraitPresent},
	} {
		s.f.ResetCalls()
		res := s.a.HandleCommand(ctx, &ironlinkv1.Command{CommandId: "c", DeviceId: id, Desired: step.desired, Generation: step.gen})
		if !res.GetSuccess() {
			t.Fatalf("%v: %s", step.desired, res.GetError())
		}
		reads := map[string]int{}
		for _, c := range s.f.Calls() {
			switch c.Method {
			case site.MethodListNodes, site.MethodProviders, site.MethodProvidersWithTrait:
				t.Errorf("%v: the command listed the site (%s)", step.desired, c.Method)
			case site.MethodGetNode, site.MethodProviderTraits:
				if c.ID != id {
					t.Errorf("%v: re-read %s %s, want only %s", step.desired, c.Method, c.ID, id)
				}
				reads[c.Method]++
			}
		}
		if reads[site.MethodGetNode] != 1 {
			t.Errorf("%v: %d node re-reads, want 1", step.desired, reads[site.MethodGetNode])
		}
		var got *ironlinkv1.DeviceUpdate
		for _, b := range s.out.Take(s.a.Snapshot) {
			for _, d := range b.GetDevices() {
				if d.GetDeviceId() != id {
					t.Errorf("%v: pushed an update for %s", step.desired, d.GetDeviceId())
				}
				got = d
			}
		}
		c := cond(got, condition.CustomerReady)
		if c == nil || c.GetStatus() != step.status || c.GetReason() != step.reason || c.GetObservedGeneration() != step.gen {
			t.Fatalf("%v: CustomerReady %v, want %s/%s generation %d", step.desired, c, step.status, step.reason, step.gen)
		}
	}
	// The next poll finds nothing new: the re-read already told the hub.
	if got := s.poll(t); len(got) != 0 {
		t.Fatalf("poll after the commands: %d updates %v", len(got), got)
	}
}

// When the re-read fails the agent falls back to a listing (the old
// behaviour), so the hub still learns the new gate.
func TestCommandRereadFailureFallsBackToPoll(t *testing.T) {
	ctx := context.Background()
	s := newFixtureSite(t, 2, false)
	s.poll(t)
	s.f.Fail(site.MethodGetNode, s.ids[0], context.DeadlineExceeded, 1)
	res := s.a.HandleCommand(ctx, &ironlinkv1.Command{CommandId: "c", DeviceId: s.ids[0],
		Desired: ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED, Generation: 1})
	if !res.GetSuccess() {
		t.Fatal(res.GetError())
	}
	for _, b := range s.out.Take(s.a.Snapshot) {
		if len(b.GetDevices()) > 0 {
			t.Fatalf("pushed %v although the re-read failed", b.GetDevices())
		}
	}
	got := s.poll(t) // what Run does on the poll the command asked for
	if len(got) != 1 || cond(got[0], condition.CustomerReady).GetReason() != conditions.ReasonQuarantined {
		t.Fatalf("poll after the failed re-read: %v", got)
	}
}

// Text from OpenStack with NUL, carriage returns and C1 controls is
// sanitized before it is sent: every fact and condition message of the
// update and of the snapshot passes the hub's check (internal/textcheck,
// as hub/link applies it), so the hub does not refuse the batch.
func TestOpenStackTextSanitized(t *testing.T) {
	s := newFixtureSite(t, 1, false)
	s.f.UpdateNode(s.ids[0], func(n *ironic.Node) {
		n.Name = "gpu\x00-01\r\n"
		n.Maintenance, n.Fault, n.MaintenanceReason = true, "power\x00failure", "BMC\x00 said\r\nno\u0085"
		n.ProvisionState, n.LastError = "deploy failed", "Traceback\x00\r\n\x1b[31mboom"
		n.Owner = string(make([]byte, 300)) // 300 NUL bytes, longer than a fact may be
	})
	s.poll(t)
	devs, ok := s.a.Snapshot()
	if !ok || len(devs) != 1 {
		t.Fatalf("snapshot %v %v", ok, devs)
	}
	check := func(d *ironlinkv1.DeviceUpdate) {
		f := d.GetFacts()
		for name, v := range map[string]string{"name": f.GetName(), "fault": f.GetFault(), "owner": f.GetOwner(),
			"provision_state": f.GetProvisionState(), "resource_class": f.GetResourceClass()} {
			if err := textcheck.Line("facts."+name, v, 255); err != nil {
				t.Errorf("fact refused by the hub's check: %v", err)
			}
		}
		for _, c := range d.GetConditions() {
			if err := textcheck.Text(c.GetType()+".message", c.GetMessage(), condition.MaxMessageBytes); err != nil {
				t.Errorf("condition message refused by the hub's check: %v", err)
			}
		}
	}
	check(devs[0])
	if got, want := devs[0].GetFacts().GetName(), "gpu\uFFFD-01 "; got != want {
		t.Errorf("name %q, want %q", got, want)
	}
	ph := cond(devs[0], condition.ProvisioningHealthy)
	if ph.GetMessage() == "" || ph.GetReason() != conditions.ReasonDeployFailed {
		t.Errorf("ProvisioningHealthy %v lost the error text", ph)
	}
	// A change after the snapshot: the delta is sanitized the same way.
	s.f.UpdateNode(s.ids[0], func(n *ironic.Node) { n.LastError = "again\x00\x07" })
	for _, d := range s.poll(t) {
		check(d)
	}
}

// sameFacts compares DeviceFacts field by field: a field added to the
// message must be added there too (else its change would not be sent).
func TestSameFactsCoversEveryField(t *testing.T) {
	if n := (&ironlinkv1.DeviceFacts{}).ProtoReflect().Descriptor().Fields().Len(); n != 16 {
		t.Fatalf("DeviceFacts has %d fields; sameFacts in facts.go compares 16: update it", n)
	}
}

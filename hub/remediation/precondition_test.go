package remediation_test

import (
	"context"
	"strings"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/remediation"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// setState reports device i of the rig's site faulted (DeployFailed) in
// provision state ps.
func (r *rig) setState(i int, ps string) {
	r.t.Helper()
	at := r.clk.Now()
	c := storetest.Healthy(at)
	for j := range c {
		if c[j].Type == condition.ProvisioningHealthy {
			c[j].Status, c[j].Reason, c[j].Message = condition.False, "DeployFailed", "last_error: deploy timed out"
		}
	}
	r.site.Send([]store.DeviceUpdate{{DeviceID: r.site.IDs[i], Conditions: c, ObservedTime: at,
		Facts: &store.Facts{Name: r.site.Name + "-00" + string(rune('0'+i)), ProvisionState: ps, PowerState: "power on"}}})
}

// Ladder steps pass the operations' checks (hub/operations' precondition
// table, as an operator's StartOperation): a REBOOT of a node in the
// middle of a deploy is refused, the ladder waits (Precondition, with the
// refusal's reason in explain and the WAITING event) and creates no
// operation; once the node is in a state a reboot starts from, the step's
// operation is created. A step still refused at its timeout fails with the
// refusal and the ladder moves on; every step refused ends in a handoff,
// no operation ever created.
func TestLadderStepsPassThePreconditions(t *testing.T) {
	r := newRig(t, ladderPolicy, 3, false)
	ctx := context.Background()
	sess, err := r.st.OpenLink(ctx, store.LinkHello{Site: "site-a", BootID: "b", Replica: "r1", Capabilities: []string{operations.Capability}}) // the same process, re-Hello with a new capability
	if err != nil {
		t.Fatal(err)
	}
	r.site.Epoch = sess.Epoch
	r.clk.Add(5 * time.Second) // the next poll is fresh: after the link came up
	checks := operations.NewServer(r.st, operations.Config{}, testlog.New(t))
	r.eng = remediation.New(r.st, remediation.Config{Now: r.clk.Now, Check: checks.CheckStep}, testlog.New(t))
	f, err := policy.Parse([]byte(ladderPolicy))
	if err != nil {
		t.Fatal(err)
	}
	api := remediation.NewAPI(r.st, func() *policy.File { return f }, func(context.Context) string { return "alice" }, testlog.New(t))
	waits, stuck := r.site.IDs[0], r.site.IDs[1]
	r.setState(0, "deploying")
	r.setState(1, "clean wait")
	r.tick()
	r.tick()
	for _, dev := range []string{waits, stuck} {
		if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1`, dev); n != 0 {
			t.Fatalf("%d operations created for a refused step", n)
		}
		if n := r.count(`SELECT count(*) FROM remediation_events WHERE device_id = $1 AND event = 'WAITING'
			AND detail LIKE 'Precondition: PROVISION_STATE: device: device % is "%"; REBOOT starts from %'`, dev); n != 1 {
			t.Fatalf("%d WAITING events naming the refusal", n)
		}
	}
	got, err := api.GetDeviceRemediation(ctx, &ironlinkv1.GetDeviceRemediationRequest{Device: waits})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetLadderRun().GetWaiting() != remediation.WaitPrecondition || !strings.Contains(got.GetPlan(), "waiting: Precondition (PROVISION_STATE: ") {
		t.Fatalf("explain of a refused step: %q waiting %q", got.GetPlan(), got.GetLadderRun().GetWaiting())
	}
	// The deploy ends (active): the reboot starts.
	r.setState(0, "active")
	r.tick()
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1 AND kind = 'REBOOT'`, waits); n != 1 {
		t.Fatalf("%d REBOOT operations once the node is active", n)
	}
	if n := r.count(`SELECT count(*) FROM remediation_ladders WHERE device_id = $1 AND waiting = ''`, waits); n != 1 {
		t.Fatal("the ladder still says it waits")
	}
	// The other stays refused past each step's timeout: each step fails
	// with the refusal, and the exhausted ladder hands it off.
	r.finishOps(waits, "SUCCEEDED")
	r.clk.Add(61 * time.Second)
	r.tick() // step 1 refused past its 1m timeout: failed
	r.tick() // step 2 (REPROVISION) starts, refused
	r.clk.Add(time.Hour + time.Second)
	r.tick() // step 2 refused past its 1h timeout: failed
	r.tick() // exhausted: handed off
	if n := r.count(`SELECT count(*) FROM remediation_steps s JOIN remediation_ladders l ON l.id = s.ladder_id
		WHERE l.device_id = $1 AND s.state = 'FAILED' AND s.detail LIKE 'refused for % (its timeout), no operation created: PROVISION_STATE: %'`, stuck); n != 2 {
		t.Fatalf("%d steps failed with the refusal, want 2", n)
	}
	if n := r.count(`SELECT count(*) FROM remediation_handoffs WHERE device_id = $1 AND reason = 'LadderExhausted'`, stuck); n != 1 {
		t.Fatal("the device whose every step was refused is not handed off")
	}
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1`, stuck); n != 0 {
		t.Fatalf("%d operations created for refused steps", n)
	}
}

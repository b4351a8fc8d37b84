package remediation_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/remediation"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// customerFault reports the rig's device i faulted (DeployFailed) while a
// customer's instance runs on it (CustomerAllocated=True, instance_uuid).
func (r *rig) customerFault(i int) {
	r.t.Helper()
	at := r.clk.Now()
	c := storetest.Healthy(at)
	for j := range c {
		switch c[j].Type {
		case condition.ProvisioningHealthy:
			c[j].Status, c[j].Reason, c[j].Message = condition.False, "DeployFailed", "last_error: deploy timed out"
		case condition.CustomerAllocated:
			c[j].Status, c[j].Reason, c[j].Message = condition.True, "CustomerProject", "project p-42"
		}
	}
	r.site.Send([]store.DeviceUpdate{{DeviceID: r.site.IDs[i], Conditions: c, ObservedTime: at,
		Facts: &store.Facts{Name: r.site.Name + "-00" + string(rune('0'+i)), ProvisionState: "active", PowerState: "power on",
			InstanceUUID: "6a1f0c52-8d0e-4d0b-9a43-7f3b2f0c9e11"}}})
}

// Conservative by default: a quarantined device with a customer instance
// makes its ladder wait (CustomerInstance), no operation. A rule whose
// ladder says actOnCustomerInstances acts on it: the step passes the
// operations' checks as a forced request (the customer guard) and its
// operation is recorded forced.
func TestLadderOnCustomerInstanceOnlyWhenTheRuleSaysSo(t *testing.T) {
	for _, c := range []struct {
		name string
		doc  string
		act  bool
	}{
		{"default", ladderPolicy, false},
		{"actOnCustomerInstances", strings.Replace(ladderPolicy, "settle: 2m", "settle: 2m\n          actOnCustomerInstances: true", 1), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, c.doc, 2, false)
			ctx := context.Background()
			sess, err := r.st.OpenLink(ctx, store.LinkHello{Site: "site-a", BootID: "b", Replica: "r1", Capabilities: []string{operations.Capability}}) // the same process, re-Hello with a new capability
			if err != nil {
				t.Fatal(err)
			}
			r.site.Epoch = sess.Epoch
			r.clk.Add(5 * time.Second)
			checks := operations.NewServer(r.st, operations.Config{}, testlog.New(t))
			r.eng = remediation.New(r.st, remediation.Config{Now: r.clk.Now, Check: checks.CheckStep}, testlog.New(t))
			dev := r.site.IDs[0]
			r.customerFault(0)
			r.tick()
			r.tick()
			if n := r.count(`SELECT count(*) FROM quarantine_holds WHERE device_id = $1`, dev); n != 1 {
				t.Fatalf("%d holds: the fault was not quarantined", n)
			}
			ops := r.count(`SELECT count(*) FROM operations WHERE device_id = $1 AND kind = 'REBOOT' AND forced`, dev)
			waits := r.count(`SELECT count(*) FROM remediation_ladders WHERE device_id = $1 AND waiting = $2`, dev, remediation.WaitCustomerInstance)
			if c.act && (ops != 1 || waits != 0) {
				t.Fatalf("%d forced REBOOT operations, %d ladders waiting; want 1, 0", ops, waits)
			}
			if !c.act && (waits != 1 || r.count(`SELECT count(*) FROM operations`) != 0) {
				t.Fatalf("%d ladders waiting for the customer instance, %d operations; want 1, 0", waits, r.count(`SELECT count(*) FROM operations`))
			}
		})
	}
}

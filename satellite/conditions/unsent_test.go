package conditions

import (
	"testing"

	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/satellite/ironic"
)

// A field Ironic's answer left out makes exactly the conditions that need
// it Unknown/FieldUnavailable; the others are computed as usual.
func TestMapUnsentFieldIsUnknownOnlyWhereNeeded(t *testing.T) {
	pool := Config{ValidationPool: Selector{ResourceClass: "gpu-h100"}}
	for _, tc := range []struct {
		name    string
		cfg     Config
		node    func(n *ironic.Node)
		unsent  []string
		unknown []condition.Type // all others must not be FieldUnavailable
	}{
		{name: "nothing unsent", unsent: nil},
		{name: "fault unsent, no maintenance: not needed", unsent: []string{"fault", "maintenance_reason"}},
		{name: "fault unsent under maintenance", node: func(n *ironic.Node) { n.Maintenance = true },
			unsent: []string{"fault"}, unknown: []condition.Type{condition.MaintenanceClear}},
		{name: "maintenance_reason unsent under maintenance", node: func(n *ironic.Node) { n.Maintenance, n.Fault = true, "power failure" },
			unsent: []string{"maintenance_reason"}, unknown: []condition.Type{condition.MaintenanceClear}},
		{name: "last_error unsent on an available node: not needed", unsent: []string{"last_error"}},
		{name: "last_error unsent on a failed deploy", node: func(n *ironic.Node) { n.ProvisionState = "deploy failed" },
			unsent: []string{"last_error"}, unknown: []condition.Type{condition.ProvisioningHealthy}},
		{name: "last_error unsent in enroll", node: func(n *ironic.Node) { n.ProvisionState = "enroll" },
			unsent: []string{"last_error"}, unknown: []condition.Type{condition.Enrolled}},
		{name: "provision_updated_at unsent in a wait state", node: func(n *ironic.Node) { n.ProvisionState = "clean wait" },
			unsent: []string{"provision_updated_at"}, unknown: []condition.Type{condition.ProvisioningHealthy}},
		{name: "target_provision_state unsent in a hold", node: func(n *ironic.Node) { n.ProvisionState = "clean hold" },
			unsent: []string{"target_provision_state"}, unknown: []condition.Type{condition.ProvisioningHealthy}},
		{name: "resource_class unsent, pool by resource class", cfg: pool,
			unsent: []string{"resource_class"}, unknown: []condition.Type{condition.InValidationPool}},
		{name: "resource_class unsent, no pool: not needed", unsent: []string{"resource_class"}},
		{name: "owner unsent, pool by resource class: not needed", cfg: pool, unsent: []string{"owner"}},
		{name: "lessee unsent", unsent: []string{"lessee"}, unknown: []condition.Type{condition.CustomerAllocated}},
		{name: "instance_uuid unsent", unsent: []string{"instance_uuid"},
			unknown: []condition.Type{condition.InstanceAllocated, condition.CustomerAllocated}},
		{name: "traits unsent", unsent: []string{"traits"}, unknown: []condition.Type{condition.CustomerReady}},
		{name: "traits unsent standalone", cfg: Config{Standalone: true}, unsent: []string{"traits"},
			unknown: []condition.Type{condition.CustomerReady}},
		{name: "provision_state unsent", unsent: []string{"provision_state"},
			unknown: []condition.Type{condition.Enrolled, condition.ProvisioningHealthy}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			if tc.node != nil {
				tc.node(&o.Node)
			}
			for _, f := range tc.unsent {
				if o.Node.Unsent == nil {
					o.Node.Unsent, o.Node.Missing = map[string]bool{}, map[string]bool{}
				}
				o.Node.Unsent[f], o.Node.Missing[f] = true, true
			}
			want := map[condition.Type]bool{}
			for _, ty := range tc.unknown {
				want[ty] = true
			}
			cs := Map(tc.cfg, o)
			if len(cs) != len(condition.Types) {
				t.Fatalf("%d conditions, want %d", len(cs), len(condition.Types))
			}
			for _, c := range cs {
				got := c.Reason == ReasonFieldUnavailable
				if got != want[c.Type] {
					t.Errorf("%s = %s/%s (%q); FieldUnavailable %v, want %v", c.Type, c.Status, c.Reason, c.Message, got, want[c.Type])
				}
				if got && c.Status != condition.Unknown {
					t.Errorf("%s FieldUnavailable with status %s, want Unknown", c.Type, c.Status)
				}
				if need := UnsentNeeded(tc.cfg, c.Type, o.Node); (need != "") != want[c.Type] {
					t.Errorf("UnsentNeeded(%s) = %q, want a field: %v", c.Type, need, want[c.Type])
				}
				if err := c.Validate(); err != nil {
					t.Errorf("%s invalid: %v", c.Type, err)
				}
			}
		})
	}
}

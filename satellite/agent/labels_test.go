package agent

import (
	"maps"
	"testing"

	"github.com/ironlink/ironlink/internal/labels"
	"github.com/ironlink/ironlink/satellite/ironic"
)

// TestNodeLabels: the site's label map reads extra, properties and the
// node's own fields; a value that is not a label value is left out.
func TestNodeLabels(t *testing.T) {
	m, err := labels.ParseMapping("rack=extra.rack,row=properties.row,pod=conductor_group,ip=extra.bmc_ip,bad=extra.desc,none=extra.absent")
	if err != nil {
		t.Fatal(err)
	}
	n := ironic.Node{UUID: "6f1c1f4e-0000-4000-8000-000000000001", ConductorGroup: "burnin",
		Extra:          map[string]string{"rack": "r12", "bmc_ip": "10.0.15.233", "desc": "Rack 12, left"},
		PropertyValues: map[string]string{"row": "7"}}
	set, bad := m.Apply(func(src string) (string, bool) { return nodeField(n, src) })
	want := map[string]string{"rack": "r12", "row": "7", "pod": "burnin", "ip": "10.0.15.233"}
	if !maps.Equal(set, want) || len(bad) != 1 || bad[0] != "bad" {
		t.Errorf("labels %v (bad %v), want %v (bad [bad])", set, bad, want)
	}
}

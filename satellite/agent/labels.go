package agent

import (
	"strings"

	"github.com/ironlink/ironlink/internal/logkey"
	"github.com/ironlink/ironlink/satellite/ironic"
)

// nodeLabels returns the failure-domain labels the site's label map gives
// n (docs/reference/labels.md); nil without a map or labels. A value that
// is not a valid label value is left out and logged once per node and key.
func (a *Agent) nodeLabels(n ironic.Node) map[string]string {
	if len(a.cfg.LabelMap) == 0 {
		return nil
	}
	set, bad := a.cfg.LabelMap.Apply(func(src string) (string, bool) { return nodeField(n, src) })
	for _, k := range bad {
		if _, seen := a.labelWarned.LoadOrStore(n.UUID+"/"+k, true); !seen {
			a.log.Warn("node field is not a valid label value; the label is left out (want 1 to 63 of [A-Za-z0-9._-])",
				logkey.DeviceID, n.UUID, "label", k)
		}
	}
	return set
}

// nodeField answers a label source (labels.Rule.Source) for n.
func nodeField(n ironic.Node, src string) (string, bool) {
	if k, ok := strings.CutPrefix(src, "extra."); ok {
		v, ok := n.Extra[k]
		return v, ok
	}
	if k, ok := strings.CutPrefix(src, "properties."); ok {
		v, ok := n.PropertyValues[k]
		return v, ok
	}
	switch src {
	case "conductor_group":
		return n.ConductorGroup, true
	case "owner":
		return n.Owner, true
	case "lessee":
		return n.Lessee, true
	case "resource_class":
		return n.ResourceClass, true
	}
	return "", false
}

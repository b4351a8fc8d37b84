package ctl

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/labels"
)

// labelFlags are get devices' label flags: -l (a label selector) and
// --show-labels (a LABELS column).
type labelFlags struct {
	selector string
	show     bool
}

func (lf *labelFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&lf.selector, "selector", "l", "", "only devices this selector matches: --selector's syntax with site=, status=, name= and labels (rack=r12,row=b; docs/reference/labels.md)")
	fl.BoolVar(&lf.show, "show-labels", false, "add a LABELS column (the device's failure-domain labels) to the table or -o wide")
}

// addLabelsColumn appends a LABELS column (k=v,... in key order) to l,
// whose items are devs in order.
func addLabelsColumn(l *listing, devs []*ironlinkv1.Device) {
	l.header = append(l.header, "LABELS")
	l.wideHeader = append(l.wideHeader, "LABELS")
	for i, d := range devs {
		text := labels.String(d.GetLabels())
		it := &l.items[i]
		it.cells = append(it.cells, text)
		it.wide = append(it.wide, text)
		it.sig += " " + text
	}
}

// describeLabels is describe device's Labels line.
func describeLabels(d *ironlinkv1.Device) string {
	if len(d.GetLabels()) == 0 {
		return "(none)"
	}
	return labels.String(d.GetLabels())
}

// labelGuardLine describes g's per-label guards ("; per rack at most 2
// devices and 50% of it"), "" without any.
func labelGuardLine(g *ironlinkv1.PolicyGuard) string {
	var b strings.Builder
	for _, lg := range g.GetPerLabel() {
		fmt.Fprintf(&b, "; per %s at most %s", lg.GetLabel(), plural(int(lg.GetMaxDevices()), "device", "devices"))
		if lg.GetMaxPercent() > 0 {
			fmt.Fprintf(&b, " and %g%% of it", lg.GetMaxPercent())
		}
	}
	return b.String()
}

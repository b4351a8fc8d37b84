package ctl

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/devsel"
)

// bulkFlags are the flags of `quarantine --selector` / `release --selector`:
// every device a selector matches, after a preview and a confirmation
// (BulkService).
type bulkFlags struct {
	selector string
	expected int
	yes      bool
}

// register adds the bulk flags to the quarantine or release command.
func (f *bulkFlags) register(cmd *cobra.Command, verb string) {
	cmd.Flags().StringVar(&f.selector, "selector", "", "act on every device matching this selector instead of named devices: "+
		"comma-separated site=SITE, status=STATUS (repeatable, or a|b), reason=CONDITION_REASON (repeatable, or a|b), class=RESOURCE_CLASS, name=GLOB, any other KEY=VALUE a label (rack=r12); "+
		"the matching devices are shown and confirmed first")
	cmd.Flags().IntVar(&f.expected, "expected-count", 0, "with --selector: the number of devices you expect to match; the hub refuses, changing nothing, when it differs")
	cmd.Flags().BoolVar(&f.yes, "yes", false, "with --selector: do not ask for confirmation")
	cmd.Use += "\n  ironlink " + verb + " --selector SELECTOR --reason TEXT [--expected-count N] [--yes]"
	cmd.Example += fmt.Sprintf(`
  # every faulted device of site-b whose Ironic fault is a power failure
  ironlink %s --selector 'site=site-b,status=faulted,reason=PowerFailure' --reason "PDU swap"
  ironlink %s --selector 'site=site-b,name=gpu-r4-*' --expected-count 32 --yes --reason "rack r4"
  ironlink %s --selector 'site=site-b,rack=r12' --reason "switch s3 down"`, verb, verb, verb)
}

// args accepts devices, or none with --selector.
func (f *bulkFlags) args(cmd *cobra.Command, args []string) error {
	if f.selector != "" {
		if len(args) > 0 {
			return usageErrf("--selector and device arguments are exclusive: give one or the other")
		}
		if f.expected < 0 {
			return usageErrf("--expected-count %d: give the number of devices you expect to match, 1 or more", f.expected)
		}
		return nil
	}
	if f.expected != 0 || f.yes {
		return usageErrf("--expected-count and --yes go with --selector")
	}
	return cobra.MinimumNArgs(1)(cmd, args)
}

// parseSelector parses the --selector syntax into a DeviceSelector
// (internal/devsel, which the fleet view's selector filter reads too).
func parseSelector(s string) (*ironlinkv1.DeviceSelector, error) {
	sel, err := devsel.Parse(s, "--selector")
	if err != nil {
		return nil, usageErrf("%s", err)
	}
	return sel, nil
}

// runBulk previews the selector, prints the matching devices, asks for
// confirmation (unless --yes), and makes the bulk call with the count the
// user saw (or --expected-count), so the hub refuses it if the fleet moved
// in between; with wait it follows every command as for named devices.
//
// A release (ro set) also prints how many devices each outcome has (what
// the release gives back, which holds remain); --dry-run stops there.
func (a *app) runBulk(ctx context.Context, quarantine bool, f *bulkFlags, ro *releaseOpts, reason string, wait bool, timeout time.Duration) error {
	verb := "release"
	if quarantine {
		verb = "quarantine"
	}
	sel, err := parseSelector(f.selector)
	if err != nil {
		return err
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	cctx, cancel := c.call(ctx)
	p, err := c.bulk.PreviewBulkImpairment(cctx, &ironlinkv1.PreviewBulkImpairmentRequest{Selector: sel, AllHolds: !quarantine && ro.allHolds})
	cancel()
	if err != nil {
		return c.explain(err)
	}
	n := a.printPreview(p, f.selector)
	if !quarantine {
		fmt.Fprintln(a.opts.Stdout, "the release would do:")
		a.countLines(p.GetReleaseCounts())
		if ro.dryRun {
			fmt.Fprintln(a.opts.Stderr, "dry run: nothing was changed")
			return nil
		}
	}
	expected, err := a.confirmBulk(f, n, verb)
	if err != nil {
		return err
	}
	reqID, cmds, counts, err := sendBulk(ctx, c, quarantine, &bulkRequest{sel, reason, int32(expected), !quarantine && ro.allHolds})
	if err != nil {
		return err
	}
	devs := commandDevices(p, cmds)
	fmt.Fprintf(a.opts.Stdout, "request %s: %s requested for %d devices\n", reqID, verb, len(cmds))
	a.countLines(counts)
	if len(cmds) == 0 {
		return nil
	}
	if !wait {
		fmt.Fprintf(a.opts.Stderr, "the sites apply it shortly: list the request's commands with `ironlink get commands --request-id %s --limit 0`, or use --wait\n", reqID)
		return nil
	}
	return a.waitCommands(ctx, c, devs, cmds, timeout)
}

// printPreview prints the devices the preview p lists (site/name and
// status) and how many the selector matches; it returns that count.
func (a *app) printPreview(p *ironlinkv1.PreviewBulkImpairmentResponse, selector string) int {
	w := tabwriter.NewWriter(a.opts.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "DEVICE\tSTATUS")
	for _, d := range p.GetDevices() {
		name := d.GetName()
		if name == "" {
			name = d.GetDeviceId()
		}
		fmt.Fprintf(w, "%s/%s\t%s\n", d.GetSite(), name, statusName(d.GetStatus()))
	}
	_ = w.Flush()
	n := int(p.GetCount())
	if n > len(p.GetDevices()) {
		fmt.Fprintf(a.opts.Stdout, "… and %d more\n", n-len(p.GetDevices()))
	}
	fmt.Fprintf(a.opts.Stdout, "%d devices match %q\n", n, selector)
	return n
}

// confirmBulk checks the n devices matched against --expected-count and,
// without --yes, asks on stdin; it returns the count the hub must find.
// Nothing matched, another count or no "yes" is an *Error.
func (a *app) confirmBulk(f *bulkFlags, n int, verb string) (int, error) {
	if n == 0 {
		return 0, &Error{Code: ExitNotFound, Msg: "no device matches the selector: nothing to " + verb}
	}
	expected := n
	if f.expected != 0 {
		if f.expected != n {
			return 0, &Error{Code: ExitRefused, Msg: fmt.Sprintf("--expected-count %d, but the selector matches %d devices: nothing was changed", f.expected, n)}
		}
		expected = f.expected
	}
	if !f.yes {
		fmt.Fprintf(a.opts.Stderr, "%s these %d devices? Type yes to go on: ", strings.ToUpper(verb[:1])+verb[1:], n)
		line, _ := bufio.NewReader(a.opts.Stdin).ReadString('\n')
		if ans := strings.ToLower(strings.TrimSpace(line)); ans != "yes" && ans != "y" {
			return 0, usageErrf("not confirmed: nothing was changed (pass --yes to skip the question)")
		}
	}
	return expected, nil
}

// bulkRequest is what a bulk quarantine or release sends.
type bulkRequest struct {
	sel      *ironlinkv1.DeviceSelector
	reason   string
	expected int32
	allHolds bool
}

// sendBulk sends the bulk quarantine (or release) r and returns its
// request id, commands and, for a release, the devices per outcome.
func sendBulk(ctx context.Context, c *client, quarantine bool, r *bulkRequest) (string, []*ironlinkv1.OperatorCommand, []*ironlinkv1.ReleaseOutcomeCount, error) {
	cctx, cancel := c.call(ctx)
	defer cancel()
	if quarantine {
		resp, err := c.bulk.BulkQuarantine(cctx, &ironlinkv1.BulkQuarantineRequest{Selector: r.sel, Reason: r.reason, ExpectedCount: r.expected})
		if err != nil {
			return "", nil, nil, c.explain(err)
		}
		return resp.GetRequestId(), resp.GetCommands(), nil, nil
	}
	resp, err := c.bulk.BulkRelease(cctx, &ironlinkv1.BulkReleaseRequest{Selector: r.sel, Reason: r.reason, ExpectedCount: r.expected, AllHolds: r.allHolds})
	if err != nil {
		return "", nil, nil, c.explain(err)
	}
	return resp.GetRequestId(), resp.GetCommands(), resp.GetCounts(), nil
}

// commandDevices returns the device of each command, named as the
// preview p listed it (site and id only for one it did not list).
func commandDevices(p *ironlinkv1.PreviewBulkImpairmentResponse, cmds []*ironlinkv1.OperatorCommand) []*ironlinkv1.Device {
	names := map[string]*ironlinkv1.Device{}
	for _, d := range p.GetDevices() {
		names[d.GetDeviceId()] = &ironlinkv1.Device{DeviceId: d.GetDeviceId(), Site: d.GetSite(), Name: d.GetName()}
	}
	devs := make([]*ironlinkv1.Device, len(cmds))
	for i, cm := range cmds {
		devs[i] = names[cm.GetDeviceId()]
		if devs[i] == nil {
			devs[i] = &ironlinkv1.Device{DeviceId: cm.GetDeviceId(), Site: cm.GetSite()}
		}
	}
	return devs
}

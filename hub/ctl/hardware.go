package ctl

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/wire"
)

// newDriftCommand builds `ironlink drift` (HardwareService.GetFleetDrift).
func (a *app) newDriftCommand() *cobra.Command {
	var class, site, output string
	cmd := &cobra.Command{
		Use:   "drift [--resource-class CLASS] [--site SITE]",
		Short: "Group each resource class's devices by their hardware facts and show the outliers",
		Long: `Fleet drift (HardwareService.GetFleetDrift): per site and resource class, the
value of each hardware fact most devices share is the expected one; every other
value is an outlier group, with its devices and a selector for bulk actions
(--selector of quarantine/release, -l of hardware reread).`,
		Example: `  ironlink drift --resource-class gpu-h100
  ironlink hardware reread -l 'site=site-a,class=gpu-h100,hw.gpu_count=7' --reason "RMA check"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connectFor(output, "", outJSON, outYAML)
			if err != nil {
				return err
			}
			cctx, cancel := c.call(cmd.Context())
			r, err := c.hw.GetFleetDrift(cctx, &ironlinkv1.GetFleetDriftRequest{ResourceClass: class, Site: site})
			cancel()
			if err != nil {
				return c.explain(err)
			}
			if output != "" {
				return writeProto(a.opts.Stdout, output, r)
			}
			a.printDrift(r)
			return nil
		},
	}
	cmd.Flags().StringVar(&class, "resource-class", "", "only this Ironic resource class")
	cmd.Flags().StringVar(&site, "site", "", "only this site")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output: json or yaml")
	return cmd
}

// printDrift prints each group's summary and its outliers.
func (a *app) printDrift(r *ironlinkv1.GetFleetDriftResponse) {
	if len(r.GetGroups()) == 0 {
		fmt.Fprintln(a.opts.Stderr, "No devices found.")
		return
	}
	for i, g := range r.GetGroups() {
		if i > 0 {
			fmt.Fprintln(a.opts.Stdout)
		}
		fmt.Fprintf(a.opts.Stdout, "%s  %s\n", g.GetSite(), g.GetSummary())
		if len(g.GetOutliers()) == 0 {
			continue
		}
		t := newTable(a.opts.Stdout, "  ", "FACT", "EXPECTED", "ACTUAL", "DEVICES", "NAMES", "SELECTOR")
		for _, o := range g.GetOutliers() {
			names := o.GetDevices()
			shown := strings.Join(names[:min(len(names), 3)], ",")
			if int(o.GetCount()) > 3 {
				shown += fmt.Sprintf(",… (%d)", o.GetCount())
			}
			t.row(o.GetFact(), o.GetExpected(), o.GetActual(), fmt.Sprint(o.GetCount()), shown, o.GetSelectorText())
		}
		t.flush()
	}
}

// newHardwareCommand builds `ironlink hardware` (history, reread).
func (a *app) newHardwareCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hardware",
		Short: "A device's hardware history; read devices' inventory and BIOS settings again",
	}
	cmd.AddCommand(a.newHardwareHistoryCommand(), a.newHardwareRereadCommand())
	return cmd
}

func (a *app) newHardwareHistoryCommand() *cobra.Command {
	var output string
	var limit int32
	cmd := &cobra.Command{
		Use:     "history DEVICE",
		Short:   "The device's hardware as each read stored it, newest first, with what changed",
		Example: `  ironlink hardware history site-a/gpu-017`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connectFor(output, "", outJSON, outYAML)
			if err != nil {
				return err
			}
			if args, err = c.expandDevicePrefixes(cmd.Context(), args, ""); err != nil {
				return err
			}
			cctx, cancel := c.call(cmd.Context())
			r, err := c.hw.ListHardwareHistory(cctx, &ironlinkv1.ListHardwareHistoryRequest{Device: args[0], PageSize: limit})
			cancel()
			if err != nil {
				return c.explain(err)
			}
			if output != "" {
				return writeProto(a.opts.Stdout, output, r)
			}
			t := newTable(a.opts.Stdout, "", "RECORDED", "INVENTORY", "STALE", "CHANGES")
			for _, e := range r.GetEntries() {
				h := e.GetHardware()
				t.row(e.GetRecordTime().AsTime().UTC().Format(time.RFC3339), h.GetInventoryStatus(), fmt.Sprint(h.GetStale()),
					orDash(strings.Join(e.GetChanges(), "; ")))
			}
			t.flush()
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output: json or yaml")
	cmd.Flags().Int32Var(&limit, "limit", 20, "at most this many entries (1-100)")
	return cmd
}

func (a *app) newHardwareRereadCommand() *cobra.Command {
	var selector, reason, site string
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "reread DEVICE... | -l SELECTOR",
		Short: "Read devices' inventory and BIOS settings from Ironic again now (operation hardware-reread)",
		Long: `Start a HARDWARE_REREAD operation per device: the satellite reads the node's
inventory and BIOS settings again at once and sends them to the hub (otherwise it
reads them on its first poll and after an inspection). -l takes the --selector
syntax of quarantine (site=, class=, status=, reason=, name=, hw.FACT=), e.g. an
outlier group's selector from ` + "`ironlink drift`" + `.`,
		Example: `  ironlink hardware reread site-a/gpu-017
  ironlink hardware reread -l 'site=site-a,class=gpu-h100,hw.gpu_count=7' --wait`,
		RunE: func(cmd *cobra.Command, args []string) error {
			devs, err := a.targets(cmd.Context(), args, selector, site)
			if err != nil {
				return err
			}
			req := &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_HARDWARE_REREAD,
				Devices: devs, Reason: reason}
			return a.startOperations(cmd.Context(), req, wait, timeout)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&selector, "selector", "l", "", "every device this selector matches instead of named devices")
	f.StringVar(&reason, "reason", "re-read hardware from Ironic", "why (kept with the operations)")
	f.StringVar(&site, "site", "", "narrows device names")
	f.BoolVar(&wait, "wait", false, "follow every operation to its end")
	f.DurationVar(&timeout, "timeout", 10*time.Minute, "how long --wait waits")
	return cmd
}

// targets returns the devices named by args, or those selector matches
// (through BulkService's preview, at most 1000).
func (a *app) targets(ctx context.Context, args []string, selector, site string) ([]string, error) {
	if (selector == "") == (len(args) == 0) {
		return nil, usageErrf("name devices or give -l SELECTOR (one or the other)")
	}
	if len(args) > 0 {
		c, err := a.connect()
		if err != nil {
			return nil, err
		}
		if args, err = c.expandDevicePrefixes(ctx, args, site); err != nil {
			return nil, err
		}
	}
	var out []string
	for _, arg := range args {
		d, err := parseDeviceArg(arg, site)
		if err != nil {
			return nil, err
		}
		out = append(out, d.ref())
	}
	if selector == "" {
		return out, nil
	}
	sel, err := parseSelector(selector)
	if err != nil {
		return nil, err
	}
	c, err := a.connect()
	if err != nil {
		return nil, err
	}
	cctx, cancel := c.call(ctx)
	p, err := c.bulk.PreviewBulkImpairment(cctx, &ironlinkv1.PreviewBulkImpairmentRequest{Selector: sel})
	cancel()
	if err != nil {
		return nil, c.explain(err)
	}
	if int(p.GetCount()) > len(p.GetDevices()) {
		return nil, usageErrf("-l %q matches %d devices; at most %d at a time: narrow it", selector, p.GetCount(), len(p.GetDevices()))
	}
	if p.GetCount() == 0 {
		return nil, usageErrf("-l %q matches no device", selector)
	}
	for _, d := range p.GetDevices() {
		out = append(out, d.GetDeviceId())
	}
	return out, nil
}

// newValidateCommand builds `ironlink validate` (a VALIDATE operation)
// and `ironlink validate runs` (HardwareService.ListValidationRuns).
func (a *app) newValidateCommand() *cobra.Command {
	var checks, steps []string
	var reason, site string
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "validate DEVICE... --check NAME... [--clean-step INTERFACE.STEP...] --reason TEXT",
		Short: "Start a validation run: inspect, check the profile, clean, wait for the checks; a pass offers the device",
		Long: `A validation run (operation validate) inspects the node, checks its hardware
against its profile (the hub's check "hardware-profile"), cleans it with the
--clean-step steps (none: its hardware profile's validation.clean_steps) and waits
for every --check's result from external checkers
(ValidationService.RecordValidationResult). When all pass the device is offered
(an OFFER command, recorded); otherwise it stays held with the failing checks
named. A device in the validation pool is offered only after a passed run.`,
		Example: `  ironlink validate site-a/gpu-017 --check gpu-burn --check nccl --clean-step deploy.erase_devices_metadata --reason "back from RMA"
  ironlink validate runs site-a/gpu-017`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return usageErrf("--reason is required: say why (it is kept with the run)")
			}
			o := opStartFlags{cleanSteps: steps}
			p, err := o.params(ironlinkv1.OperationKind_OPERATION_KIND_VALIDATE)
			if err != nil {
				return err
			}
			p.ValidationChecks = checks
			devs, err := a.targets(cmd.Context(), args, "", site)
			if err != nil {
				return err
			}
			req := &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_VALIDATE, Devices: devs, Reason: reason, Params: p}
			return a.startOperations(cmd.Context(), req, wait, timeout)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&checks, "check", nil, "an external check whose passing result the run waits for, repeatable")
	f.StringSliceVar(&steps, "clean-step", nil, "INTERFACE.STEP to clean with, repeatable, in order (none: the hardware profile's validation.clean_steps, if any)")
	f.StringVar(&reason, "reason", "", "why (required)")
	f.StringVar(&site, "site", "", "narrows device names")
	f.BoolVar(&wait, "wait", false, "follow the operations to their end (the run then waits for its checks)")
	f.DurationVar(&timeout, "timeout", 30*time.Minute, "how long --wait waits")
	cmd.AddCommand(a.newValidationRunsCommand())
	return cmd
}

func (a *app) newValidationRunsCommand() *cobra.Command {
	var site, output string
	cmd := &cobra.Command{
		Use:     "runs [DEVICE] [--site SITE]",
		Short:   "Validation runs with their checks' results, newest first",
		Example: `  ironlink validate runs site-a/gpu-017 -o yaml`,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connectFor(output, "", outJSON, outYAML)
			if err != nil {
				return err
			}
			req := &ironlinkv1.ListValidationRunsRequest{Site: site}
			if len(args) == 1 {
				req.Device = args[0]
			}
			cctx, cancel := c.call(cmd.Context())
			r, err := c.hw.ListValidationRuns(cctx, req)
			cancel()
			if err != nil {
				return c.explain(err)
			}
			if output != "" {
				return writeProto(a.opts.Stdout, output, r)
			}
			a.printValidationRuns(r.GetRuns())
			return nil
		},
	}
	cmd.Flags().StringVar(&site, "site", "", "the runs of this site")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output: json or yaml")
	return cmd
}

// printValidationRuns prints runs and, under each, its checks.
func (a *app) printValidationRuns(runs []*ironlinkv1.ValidationRun) {
	if len(runs) == 0 {
		fmt.Fprintln(a.opts.Stderr, "No validation runs found.")
		return
	}
	for _, r := range runs {
		fmt.Fprintf(a.opts.Stdout, "%s  %s/%s  %s  %s\n", r.GetRunId(), r.GetSite(), orDash(r.GetDeviceName()),
			wire.EnumName(r.GetState(), "VALIDATION_RUN_STATE_"), r.GetMessage())
		byName := map[string]*ironlinkv1.ValidationCheckResult{}
		for _, v := range r.GetResults() {
			byName[v.GetCheck()] = v
		}
		t := newTable(a.opts.Stdout, "  ", "CHECK", "RESULT", "DURATION", "ARTIFACTS", "OUTPUT")
		for _, name := range slices.Sorted(maps.Keys(byName)) {
			v := byName[name]
			t.row(name, wire.EnumName(v.GetResult(), "VALIDATION_RESULT_"), v.GetDuration().AsDuration().String(),
				orDash(v.GetArtifactsUrl()), orDash(firstLine(v.GetOutputExcerpt())))
		}
		for _, c := range r.GetRequiredChecks() {
			if byName[c] == nil {
				t.row(c, "WAITING", "-", "-", "-")
			}
		}
		t.flush()
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

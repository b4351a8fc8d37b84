package ctl

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/hwview"
)

func (a *app) newDescribeCommand() *cobra.Command {
	d := &cobra.Command{
		Use:   "describe (device|site) NAME",
		Short: "Everything about one device or site, for people",
		Example: `  ironlink describe device node-007
  ironlink describe device demo/node-007
  ironlink describe site demo`,
	}
	d.AddCommand(a.newDescribeDevice(), a.newDescribeSite())
	return d
}

func (a *app) newDescribeDevice() *cobra.Command {
	var site, output, asOfFlag string
	var history, commands int
	cmd := &cobra.Command{
		Use:     "device NAME|SITE/NAME|UUID...",
		Aliases: []string{"devices", "dev"},
		Short:   "A device's facts, conditions with reasons and ages, status and why, histories and recent commands",
		Example: `  ironlink describe device node-007
  ironlink describe device node-007 --history 5
  ironlink describe device node-007 -o yaml   # the GetDevice answer
  ironlink describe device node-007 --as-of 9h  # as it was 9 hours ago`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: a.completeDevices,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, outTable, outJSON, outYAML); err != nil {
				return err
			}
			if history < 1 || history > 1000 {
				return usageErrf("--history %d: want 1-1000", history)
			}
			asOf, err := parseAsOf(asOfFlag, a.opts.Now())
			if err != nil {
				return err
			}
			if asOf != nil {
				at := asOf.AsTime()
				a.ageAt = &at
				defer func() { a.ageAt = nil }()
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if args, err = c.expandDevicePrefixes(ctx, args, site); err != nil {
				return err
			}
			var devs []deviceArg
			for _, arg := range args {
				d, err := parseDeviceArg(arg, site)
				if err != nil {
					return err
				}
				devs = append(devs, d)
			}
			for i, d := range devs {
				r, err := c.getDeviceAsOf(ctx, d, int32(history), asOf)
				if err != nil {
					return err
				}
				if output != outTable {
					if err := writeProto(a.opts.Stdout, output, r); err != nil {
						return err
					}
					continue
				}
				var cmds []*ironlinkv1.OperatorCommand
				var decisions []*ironlinkv1.PolicyDecision
				if commands > 0 && asOf == nil {
					cctx, cancel := c.call(ctx)
					lc, err := c.fleet.ListCommands(cctx, &ironlinkv1.ListCommandsRequest{DeviceId: r.GetDevice().GetDeviceId(), PageSize: int32(commands)})
					cancel()
					if err != nil {
						return c.explain(err)
					}
					cmds = append([]*ironlinkv1.OperatorCommand{}, lc.GetCommands()...) // non-nil: the section is shown
					cctx, cancel = c.call(ctx)
					ld, err := c.policy.ListPolicyDecisions(cctx, &ironlinkv1.ListPolicyDecisionsRequest{DeviceId: r.GetDevice().GetDeviceId(), PageSize: int32(commands)})
					cancel()
					if err != nil {
						return c.explain(err)
					}
					decisions = append([]*ironlinkv1.PolicyDecision{}, ld.GetDecisions()...)
				}
				if i > 0 {
					fmt.Fprintln(a.opts.Stdout)
				}
				a.printDevice(a.opts.Stdout, r, cmds)
				a.printDeviceActivity(a.opts.Stdout, r, cmds != nil, decisions)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&site, "site", "", "the site of a device name used at more than one site")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml: print the hub's GetDevice answer instead")
	cmd.Flags().IntVar(&history, "history", 10, "history entries to show per history (1-1000)")
	cmd.Flags().IntVar(&commands, "commands", 5, "recent commands and policy decisions to show (0: none; none with --as-of)")
	cmd.Flags().StringVar(&asOfFlag, "as-of", "", asOfHelp)
	_ = cmd.RegisterFlagCompletionFunc("site", a.completeSites)
	return cmd
}

// optUint renders an optional inspected property (Ironic properties
// cpus, memory_mb, local_gb) with its unit suffix; "" (shown as "-") when
// the satellite did not know it.
func optUint[T uint32 | uint64](v *T, unit string) string {
	if v == nil {
		return ""
	}
	return strconv.FormatUint(uint64(*v), 10) + unit
}

// field prints "Label:" padded to a common column, then the value.
func field(w io.Writer, label, value string) {
	fmt.Fprintf(w, "%-20s%s\n", label+":", orDash(value))
}

// printDevice prints `describe device`: the device's summary, facts,
// history and, when cmds is not nil, its recent commands.
func (a *app) printDevice(w io.Writer, r *ironlinkv1.GetDeviceResponse, cmds []*ironlinkv1.OperatorCommand) {
	a.printDeviceSummary(w, r)
	if len(r.GetDevice().GetLabels()) > 0 {
		field(w, "Labels", describeLabels(r.GetDevice()))
	}
	a.printFacts(w, r.GetDevice())
	printHardware(w, r)
	a.printDeviceHistory(w, r.GetDevice(), r)
	a.printRecentCommands(w, cmds)
}

// printDeviceSummary prints the device's identity, status and why,
// quarantine state, last command error, freshness and removal.
func (a *app) printDeviceSummary(w io.Writer, r *ironlinkv1.GetDeviceResponse) {
	d := r.GetDevice()
	if a.ageAt != nil {
		field(w, "As of", a.ageAt.UTC().Format(time.RFC3339)+" (the device as it was then; ages count from then)")
	}
	field(w, "Name", d.GetName())
	field(w, "UUID", d.GetDeviceId())
	field(w, "Site", d.GetSite())
	field(w, "Status", fmt.Sprintf("%s for %s", deviceStatus(d), a.age(d.GetStatusChangeTime())))
	field(w, "Reason", d.GetStatusReason())
	a.printExplanation(w, r.GetExplanation())
	q := "never quarantined or released"
	if d.GetDesiredGeneration() > 0 {
		q = fmt.Sprintf("%s (generation %d, applied %d)", impairmentName(d.GetDesiredImpairment()), d.GetDesiredGeneration(), d.GetAppliedGeneration())
		if h := r.GetImpairmentHistory(); len(h) > 0 {
			q += fmt.Sprintf(" by %s %s ago: %q", h[0].GetActor(), a.age(h[0].GetChangeTime()), h[0].GetReason())
		}
	}
	field(w, "Quarantine", q)
	for _, h := range r.GetQuarantineHolds() {
		field(w, "Held by", fmt.Sprintf("%s (%s %s ago: %q)", h.GetHolder(), h.GetActor(), a.age(h.GetCreateTime()), h.GetReason()))
	}
	for _, h := range d.GetPolicyHolds() {
		until := "until cleared"
		if h.GetEndTime() != nil {
			until = "until " + h.GetEndTime().AsTime().UTC().Format(time.RFC3339)
		}
		field(w, "Policy hold", fmt.Sprintf("%s by %s %s (%q; `ironlink holds clear` ends it)", holdKindName(h.GetKind()), h.GetAuthor(), until, h.GetReason()))
	}
	if p := r.GetReleasePlan(); p != nil {
		field(w, "Release would", planLine(p))
	}
	if d.GetLastCommandError() != "" {
		field(w, "Last command error", d.GetLastCommandError())
	}
	field(w, "Last update", a.age(d.GetObservedTime())+" ago (newest change or snapshot the satellite sent)")
	if d.GetRemoved() {
		field(w, "Removed", a.age(d.GetRemoveTime())+" ago (the node vanished from Ironic)")
	}
}

// printFacts prints device d's Ironic facts, its drift corrections and its
// orphaned instances.
func (a *app) printFacts(w io.Writer, d *ironlinkv1.Device) {
	f := d.GetFacts()
	fmt.Fprintln(w, "Facts:")
	t := newTable(w, "  ")
	maint := "false"
	if f.GetMaintenance() {
		maint = "true"
	}
	for _, kv := range [][2]string{
		{"Provision state:", f.GetProvisionState()}, {"Power state:", f.GetPowerState()}, {"Maintenance:", maint},
		{"Fault:", f.GetFault()}, {"Resource class:", f.GetResourceClass()}, {"Instance:", f.GetInstanceUuid()},
		{"Lessee:", f.GetLessee()}, {"Owner:", f.GetOwner()}, {"Conductor group:", f.GetConductorGroup()},
		{"CPUs:", optUint(f.Cpus, "")}, {"Memory:", optUint(f.MemoryMb, " MiB")}, {"Local disk:", optUint(f.LocalGb, " GiB")},
		{"CPU arch:", f.GetCpuArch()},
	} {
		t.row(kv[0], kv[1])
	}
	t.flush()
	if d.GetDriftCorrections() > 0 {
		field(w, "Drift corrections", fmt.Sprintf("%d, last %s ago: %s", d.GetDriftCorrections(), a.age(d.GetLastDriftCorrectionTime()), d.GetLastDriftCorrection()))
	}
	if ms := f.GetInstanceMismatches(); len(ms) > 0 {
		fmt.Fprintln(w, "Orphaned instances:")
		t := newTable(w, "  ", "KIND", "IRONIC-INSTANCE", "NOVA-SERVER", "NOVA-STATUS", "PROJECT", "SEEN")
		for _, m := range ms {
			t.row(strings.TrimPrefix(m.GetKind().String(), "INSTANCE_MISMATCH_KIND_"), m.GetIronicInstanceUuid(), m.GetNovaServerId(),
				m.GetNovaServerStatus(), m.GetNovaProjectId(), a.age(m.GetFirstSeenTime()))
		}
		t.flush()
	}
}

// printHardware prints the device's hardware: the state of its inventory
// ("no inventory: NotInspected", "stale since …"), the profile check and
// the key facts (internal/hwview).
func printHardware(w io.Writer, r *ironlinkv1.GetDeviceResponse) {
	fmt.Fprintln(w, "Hardware:")
	t := newTable(w, "  ")
	t.row("Inventory:", hwview.State(r.GetHardware()))
	if p := r.GetHardwareProfile(); p != nil {
		c := p.GetCondition()
		v := fmt.Sprintf("%s: HardwareMatchesProfile %s (%s)", p.GetProfile(), conditionStatusName(c.GetStatus()), c.GetReason())
		if m := c.GetMessage(); m != "" {
			v += " " + truncate(m, 200)
		}
		t.row("Profile:", v)
	}
	for _, f := range hwview.Facts(r.GetHardware()) {
		t.row(f.Label+":", truncate(f.Value, 200))
	}
	t.flush()
}

// printDeviceHistory prints device d's conditions, then the status and
// quarantine histories of r (newest first).
func (a *app) printDeviceHistory(w io.Writer, d *ironlinkv1.Device, r *ironlinkv1.GetDeviceResponse) {
	fmt.Fprintln(w, "Conditions:")
	t := newTable(w, "  ", "TYPE", "STATUS", "REASON", "AGE", "MESSAGE")
	for _, c := range d.GetConditions() {
		t.row(c.GetType(), conditionStatusName(c.GetStatus()), c.GetReason(), a.age(c.GetLastTransitionTime()), truncate(c.GetMessage(), 100))
	}
	t.flush()
	fmt.Fprintln(w, "Status history (newest first):")
	t = newTable(w, "  ", "AGE", "STATUS", "REASON")
	for _, h := range r.GetStatusHistory() {
		t.row(a.age(h.GetChangeTime()), statusName(h.GetStatus()), h.GetReason())
	}
	t.flush()
	fmt.Fprintln(w, "Quarantine history (newest first):")
	if len(r.GetImpairmentHistory()) == 0 {
		fmt.Fprintln(w, "  none")
	} else {
		t = newTable(w, "  ", "AGE", "ACTION", "GEN", "ACTOR", "SOURCE", "REASON")
		for _, h := range r.GetImpairmentHistory() {
			t.row(a.age(h.GetChangeTime()), commandAction(h.GetAction(), h.GetDesired()), strconv.FormatInt(h.GetGeneration(), 10), h.GetActor(), h.GetSource(), h.GetReason())
		}
		t.flush()
	}
}

// printRecentCommands prints the device's recent commands (newest first);
// nothing when cmds is nil (they were not asked for).
func (a *app) printRecentCommands(w io.Writer, cmds []*ironlinkv1.OperatorCommand) {
	if cmds == nil {
		return
	}
	fmt.Fprintln(w, "Recent commands (newest first):")
	if len(cmds) == 0 {
		fmt.Fprintln(w, "  none")
		return
	}
	t := newTable(w, "  ", "AGE", "ID", "ACTION", "STATE", "ATTEMPTS", "ERROR")
	for _, c := range cmds {
		t.row(a.age(c.GetCreateTime()), c.GetCommandId(), commandAction(c.GetAction(), c.GetDesired()), commandStateName(c.GetState()), strconv.Itoa(int(c.GetAttempts())), truncate(c.GetLastError(), 80))
	}
	t.flush()
}

func (a *app) newDescribeSite() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:               "site NAME...",
		Aliases:           []string{"sites"},
		Short:             "A site's link, site conditions, devices by status and recent commands",
		Example:           `  ironlink describe site demo`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: a.completeSites,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connectFor(output, outTable, outJSON, outYAML)
			if err != nil {
				return err
			}
			l, err := a.fetchSites(cmd.Context(), args, nil)
			if err != nil {
				return c.explain(err)
			}
			if output != outTable {
				return writeProto(a.opts.Stdout, output, l.msg)
			}
			for i, s := range l.msg.(*ironlinkv1.ListSitesResponse).GetSites() {
				if i > 0 {
					fmt.Fprintln(a.opts.Stdout)
				}
				if err := a.describeSite(cmd.Context(), s); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml: print the site as the hub's ListSites has it")
	return cmd
}

func (a *app) describeSite(ctx context.Context, s *ironlinkv1.Site) error {
	c, w := a.cl, a.opts.Stdout
	counts := map[string]int{}
	var quarantined int
	req := &ironlinkv1.ListDevicesRequest{Site: s.GetName(), PageSize: listPageSize}
	for {
		cctx, cancel := c.call(ctx)
		page, err := c.fleet.ListDevices(cctx, req)
		cancel()
		if err != nil {
			return c.explain(err)
		}
		for _, d := range page.GetDevices() {
			counts[statusName(d.GetStatus())]++
			if d.GetDesiredImpairment() == ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED {
				quarantined++
			}
		}
		if req.PageToken = page.GetNextPageToken(); req.PageToken == "" {
			break
		}
	}
	field(w, "Name", s.GetName())
	link := linkStateName(s.GetLinkState())
	if s.GetReplica() != "" {
		link += " to replica " + s.GetReplica()
	}
	field(w, "Link", link)
	field(w, "Last seen", a.age(s.GetLastSeenTime())+" ago")
	field(w, "Satellite", s.GetSatelliteVersion())
	field(w, "Capabilities", strings.Join(s.GetCapabilities(), ", "))
	field(w, "Sequence", strconv.FormatUint(s.GetLastCommittedSequence(), 10))
	field(w, "Devices", fmt.Sprintf("%d (%d quarantined, %s)", s.GetDeviceCount(), quarantined, plural(int(s.GetInstanceMismatchCount()), "with an orphaned instance", "with orphaned instances")))
	fmt.Fprintln(w, "Devices by status:")
	var names []string
	for n := range counts {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		return ironlinkv1.OperationalStatus_value["OPERATIONAL_STATUS_"+names[i]] < ironlinkv1.OperationalStatus_value["OPERATIONAL_STATUS_"+names[j]]
	})
	t := newTable(w, "  ", "STATUS", "COUNT")
	for _, n := range names {
		t.row(n, strconv.Itoa(counts[n]))
	}
	t.flush()
	fmt.Fprintln(w, "Conditions:")
	if len(s.GetConditions()) == 0 {
		fmt.Fprintln(w, "  none reported")
	} else {
		t = newTable(w, "  ", "TYPE", "STATUS", "REASON", "AGE", "MESSAGE")
		for _, cd := range s.GetConditions() {
			t.row(cd.GetType(), conditionStatusName(cd.GetStatus()), cd.GetReason(), a.age(cd.GetLastTransitionTime()), truncate(cd.GetMessage(), 100))
		}
		t.flush()
	}
	cctx, cancel := c.call(ctx)
	lc, err := c.fleet.ListCommands(cctx, &ironlinkv1.ListCommandsRequest{Site: s.GetName(), PageSize: 5})
	cancel()
	if err != nil {
		return c.explain(err)
	}
	fmt.Fprintln(w, "Recent commands (newest first):")
	if len(lc.GetCommands()) == 0 {
		fmt.Fprintln(w, "  none")
		return nil
	}
	names2 := a.deviceNames(ctx, lc.GetCommands())
	t = newTable(w, "  ", "AGE", "ID", "DEVICE", "ACTION", "STATE", "ERROR")
	for _, cm := range lc.GetCommands() {
		dev := names2[cm.GetDeviceId()]
		if dev == "" {
			dev = cm.GetDeviceId()
		}
		t.row(a.age(cm.GetCreateTime()), cm.GetCommandId(), dev, commandAction(cm.GetAction(), cm.GetDesired()), commandStateName(cm.GetState()), truncate(cm.GetLastError(), 80))
	}
	t.flush()
	return nil
}

// printDeviceActivity prints the device's recent operations (from the
// GetDevice answer) and, with decisions not nil, its recent policy
// decisions; shown tells whether the sections were asked for (--commands).
func (a *app) printDeviceActivity(w io.Writer, r *ironlinkv1.GetDeviceResponse, shown bool, decisions []*ironlinkv1.PolicyDecision) {
	if !shown {
		return
	}
	fmt.Fprintln(w, "Recent operations (newest first):")
	if len(r.GetRecentOperations()) == 0 {
		fmt.Fprintln(w, "  none")
	} else {
		t := newTable(w, "  ", "AGE", "ID", "KIND", "STATE", "PROVISION", "ACTOR", "ERROR")
		for _, o := range r.GetRecentOperations() {
			t.row(a.age(o.GetCreateTime()), shortID(o.GetOperationId()), opKindName(o.GetKind()), opStateName(o.GetState()), o.GetProvisionState(), o.GetActor(), truncate(o.GetLastError(), 80))
		}
		t.flush()
	}
	fmt.Fprintln(w, "Policy decisions (newest first):")
	if len(decisions) == 0 {
		fmt.Fprintln(w, "  none")
		return
	}
	t := newTable(w, "  ", "AGE", "ID", "ACTION", "REASON", "RULE", "CHANGE")
	for _, d := range decisions {
		action := strings.TrimPrefix(d.GetAction().String(), "POLICY_ACTION_")
		if d.GetDryRun() {
			action += " (dry-run)"
		}
		t.row(a.age(d.GetDecideTime()), strconv.FormatInt(d.GetId(), 10), action, d.GetReason(), d.GetRule(), d.GetFromStatus()+" -> "+d.GetToStatus())
	}
	t.flush()
}

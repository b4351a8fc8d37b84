package ctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// feedFlags are the flags `watch` and `events` share.
type feedFlags struct {
	site, statuses, kinds, cursor, output, selector, since, until string
	devices                                                       []string
	fromOldest                                                    bool
}

// register defines the flags on cmd; watch has --cursor and --from-oldest,
// events has --until.
func (ff *feedFlags) register(cmd *cobra.Command, a *app, watch bool) {
	fl := cmd.Flags()
	fl.StringVar(&ff.site, "site", "", "only changes of this site")
	fl.StringVar(&ff.statuses, "status", "", "only status changes into or out of these statuses, comma-separated (command changes are not filtered by status)")
	fl.StringVar(&ff.kinds, "kind", "", "only these kinds of change: status, command, operation, decision, pending, policy (decision and pending), remediation (ladder steps and handoffs), validation (validation runs' starts, check results, verdicts); comma-separated, default all")
	fl.StringSliceVar(&ff.devices, "device", nil, "only changes of this device (NAME, SITE/NAME or UUID; repeatable)")
	fl.StringVarP(&ff.selector, "selector", "l", "", "only changes of the devices this selector matches when the command starts (as quarantine --selector: site=, status=, reason=, class=, name=, hw.FACT=, or a label such as rack=)")
	fl.StringVar(&ff.since, "since", "", "start from this time: RFC 3339 or a duration ago (10m, 2h), among the changes the hub keeps")
	if watch {
		fl.StringVar(&ff.cursor, "cursor", "", "resume after this cursor (from -o wide or -o json)")
		fl.BoolVar(&ff.fromOldest, "from-oldest", false, "start from the oldest change the hub keeps instead of now")
		fl.StringVarP(&ff.output, "output", "o", "", "wide (with cursors, reasons in full) or json (every WatchFleetResponse, one per line)")
	} else {
		fl.StringVar(&ff.until, "until", "", "end at this time: RFC 3339 or a duration ago (default: the newest change)")
		fl.StringVarP(&ff.output, "output", "o", "", "wide (with cursors, reasons in full) or json (every WatchFleetResponse, one per line)")
	}
	_ = cmd.RegisterFlagCompletionFunc("site", a.completeSites)
	_ = cmd.RegisterFlagCompletionFunc("device", a.completeDevices)
	_ = cmd.RegisterFlagCompletionFunc("kind", cobra.FixedCompletions(watchKinds, cobra.ShellCompDirectiveNoFileComp))
}

// feedFilter is what the CLI filters out of the hub's feed itself: the
// devices of --device and -l, the time window of --since and --until, and
// (events) the end of the retained feed.
type feedFilter struct {
	// devices are the device ids followed; nil: all.
	devices map[string]bool
	// since and until bound the event times (zero: unbounded).
	since, until time.Time
	// toNow ends the feed at its first idle progress mark: the hub has sent
	// every change it had (events).
	toNow bool
}

// errFeedDone ends a feed the filter says is complete.
var errFeedDone = errors.New("feed done")

// window reports whether the feed is read as history (events), not followed.
func (f *feedFilter) window() bool { return f != nil && f.toNow }

// pass says whether message m is printed and whether the feed is done.
// first is the stream's first message (a progress mark, not an idle one).
func (f *feedFilter) pass(m *ironlinkv1.WatchFleetResponse, first bool) (keep, done bool) {
	if f == nil {
		return true, false
	}
	e := m.GetEvent()
	if e == nil {
		return !f.toNow, f.toNow && !first
	}
	t := e.GetEventTime().AsTime()
	if !f.until.IsZero() && t.After(f.until) {
		return false, true
	}
	if !f.since.IsZero() && t.Before(f.since) {
		return false, false
	}
	return f.devices == nil || f.devices[eventDeviceID(e)], false
}

// eventDeviceID is the device a change is about ("" when none).
func eventDeviceID(e *ironlinkv1.FleetEvent) string {
	switch {
	case e.GetDeviceStatus() != nil:
		return e.GetDeviceStatus().GetDeviceId()
	case e.GetCommandState() != nil:
		return e.GetCommandState().GetCommand().GetDeviceId()
	case e.GetOperationState() != nil:
		return e.GetOperationState().GetOperation().GetDeviceId()
	case e.GetPolicyDecision() != nil:
		return e.GetPolicyDecision().GetDecision().GetDeviceId()
	case e.GetPendingAction() != nil:
		return e.GetPendingAction().GetPendingAction().GetDeviceId()
	case e.GetRemediation() != nil:
		return e.GetRemediation().GetDeviceId()
	case e.GetValidation() != nil:
		return e.GetValidation().GetDeviceId()
	}
	return ""
}

// openFeed checks the flags, connects and builds the WatchFleet request
// and the CLI's own filter (nil when it filters nothing). args are devices
// given as arguments (events).
func (a *app) openFeed(cmd *cobra.Command, ff *feedFlags, args []string) (*client, *ironlinkv1.WatchFleetRequest, *feedFilter, error) {
	if err := checkOutput(ff.output, outTable, outWide, outJSON); err != nil {
		return nil, nil, nil, err
	}
	req := &ironlinkv1.WatchFleetRequest{Site: ff.site, Cursor: ff.cursor, FromOldest: ff.fromOldest}
	var err error
	if req.Statuses, err = parseEnumList[ironlinkv1.OperationalStatus]("status", ff.statuses, ironlinkv1.OperationalStatus_value, "OPERATIONAL_STATUS_"); err != nil {
		return nil, nil, nil, err
	}
	if req.Kinds, err = parseWordList("kind", ff.kinds, watchKindValues, strings.Join(watchKinds, ", ")); err != nil {
		return nil, nil, nil, err
	}
	filter := &feedFilter{}
	now := a.opts.Now()
	if ff.since != "" {
		ts, err := parseAsOf(ff.since, now)
		if err != nil {
			return nil, nil, nil, usageErrf("--since%s", strings.TrimPrefix(err.Error(), "--as-of"))
		}
		if ff.cursor != "" {
			return nil, nil, nil, usageErrf("--since and --cursor are exclusive: a cursor already says where to start")
		}
		filter.since, req.FromOldest = ts.AsTime(), true
	}
	if ff.until != "" {
		ts, err := parseAsOf(ff.until, now)
		if err != nil {
			return nil, nil, nil, usageErrf("--until%s", strings.TrimPrefix(err.Error(), "--as-of"))
		}
		filter.until = ts.AsTime()
	}
	devices := append(append([]string{}, args...), ff.devices...)
	if ff.selector != "" && len(devices) > 0 {
		return nil, nil, nil, usageErrf("give devices (--device or arguments) or a selector (-l), not both")
	}
	var sel *ironlinkv1.DeviceSelector
	if ff.selector != "" {
		if sel, err = parseSelector(ff.selector); err != nil {
			return nil, nil, nil, err
		}
	}
	c, err := a.connect()
	if err != nil {
		return nil, nil, nil, err
	}
	if filter.devices, err = a.feedDevices(cmd.Context(), c, devices, sel, req); err != nil {
		return nil, nil, nil, err
	}
	return c, req, filter, nil
}

// feedDevices resolves devices or the selector into the device ids to
// follow (nil: no device filter); when they are all at one site and no
// --site was given, req is narrowed to it.
func (a *app) feedDevices(ctx context.Context, c *client, devices []string, sel *ironlinkv1.DeviceSelector, req *ironlinkv1.WatchFleetRequest) (map[string]bool, error) {
	if len(devices) == 0 && sel == nil {
		return nil, nil
	}
	ids := map[string]bool{}
	sites := map[string]bool{}
	if sel != nil {
		cctx, cancel := c.call(ctx)
		p, err := c.bulk.PreviewBulkImpairment(cctx, &ironlinkv1.PreviewBulkImpairmentRequest{Selector: sel})
		cancel()
		if err != nil {
			return nil, c.explain(err)
		}
		if int(p.GetCount()) > len(p.GetDevices()) {
			return nil, usageErrf("the selector matches %d devices, more than the %d the CLI can follow by device: narrow it, or use --site/--status", p.GetCount(), len(p.GetDevices()))
		}
		if p.GetCount() == 0 {
			return nil, &Error{Code: ExitNotFound, Msg: "no device matches the selector"}
		}
		for _, m := range p.GetDevices() {
			ids[m.GetDeviceId()], sites[m.GetSite()] = true, true
		}
	} else {
		devs, err := c.resolveDevices(ctx, devices, req.GetSite())
		if err != nil {
			return nil, err
		}
		for _, d := range devs {
			ids[d.GetDeviceId()], sites[d.GetSite()] = true, true
		}
	}
	if req.GetSite() == "" && len(sites) == 1 {
		for s := range sites {
			req.Site = s
		}
	}
	return ids, nil
}

// newEventsCommand builds `ironlink events`: the changes of the fleet, of
// some devices or of a selector within a time window, from the hub's
// retained change feed, then ends.
func (a *app) newEventsCommand() *cobra.Command {
	var ff feedFlags
	cmd := &cobra.Command{
		Use:   "events [NAME|SITE/NAME|UUID...]",
		Short: "What happened to devices between two times: status, command, operation and policy changes",
		Long: `Print what happened to devices within a time window, then end.
events reads the changes the hub's feed keeps (FleetService.WatchFleet from
the oldest change) for the named devices, the devices a selector (-l)
matches, or the whole fleet, between --since and --until, oldest first,
then ends: at the first change after --until, or once the hub has sent
every change it has (it says so after 5 s without one). ` + "`ironlink watch`" + `
follows the feed instead. Reasons are cut to 80 characters; -o wide prints
them in full.`,
		Example: `  ironlink events node-007 --since 24h
  ironlink events -l 'site=demo,status=faulted' --since 2h --kind status,command
  ironlink events --site demo --since 2026-12-01T03:00:00Z --until 2026-12-01T04:00:00Z`,
		ValidArgsFunction: a.completeDevices,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, req, filter, err := a.openFeed(cmd, &ff, args)
			if err != nil {
				return err
			}
			req.FromOldest, filter.toNow = true, true
			if !filter.since.IsZero() && !filter.until.IsZero() && !filter.until.After(filter.since) {
				return usageErrf("--until must be after --since")
			}
			if err := a.follow(cmd.Context(), c, req, ff.output, false, "", filter); err != nil {
				return err
			}
			fmt.Fprintln(a.opts.Stderr, "(end of the changes the hub keeps for this window)")
			return nil
		},
	}
	ff.register(cmd, a, false)
	return cmd
}

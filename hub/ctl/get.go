package ctl

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/devsel"
)

// listPageSize is the page size the CLI asks for; it follows
// next_page_token until the last page.
const listPageSize = 500

// listFlags are the flags every `get` has.
type listFlags struct {
	output   string
	watch    bool
	interval time.Duration
}

func (f *listFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.output, "output", "o", "", "output format: wide, json, yaml or name (default: a table)")
	cmd.Flags().BoolVarP(&f.watch, "watch", "w", false, "after the listing, poll and print what changes (Ctrl-C stops)")
	cmd.Flags().DurationVar(&f.interval, "interval", 2*time.Second, "how often --watch polls")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"wide", "json", "yaml", "name"}, cobra.ShellCompDirectiveNoFileComp))
}

func (f *listFlags) check() error {
	if err := checkOutput(f.output, outTable, outWide, outJSON, outYAML, outName); err != nil {
		return err
	}
	if f.watch && f.output == outYAML {
		return usageErrf("--watch prints one change per line: use -o json, name, wide or a table, not yaml")
	}
	if f.interval < 100*time.Millisecond {
		return usageErrf("--interval %s is below 100ms", f.interval)
	}
	return nil
}

// run prints once, or watches.
func (a *app) runListing(cmd *cobra.Command, f *listFlags, fetch fetchFunc, emptyHint string) error {
	c, err := a.connect()
	if err != nil {
		return err
	}
	wrapped := func(ctx context.Context) (*listing, error) {
		l, err := fetch(ctx)
		return l, c.explain(err)
	}
	if f.watch {
		return a.watch(cmd.Context(), c, f.output, f.interval, wrapped, emptyHint)
	}
	l, err := wrapped(cmd.Context())
	if err != nil {
		return err
	}
	return printListing(a.opts.Stdout, a.opts.Stderr, f.output, l, &aligner{}, emptyHint)
}

func (a *app) newGetCommand() *cobra.Command {
	get := &cobra.Command{
		Use:   "get (sites|devices|commands|operations|decisions|pending)",
		Short: "List sites, devices, commands, operations, policy decisions or pending actions as a table (or -o wide|json|yaml|name)",
		Example: `  ironlink get sites
  ironlink get devices --status faulted,maintenance
  ironlink get devices --site demo --impairment quarantined -o wide
  ironlink get commands --device node-007`,
	}
	get.AddCommand(a.newGetSites(), a.newGetDevices(), a.newGetCommands(), a.newGetDecisions(), a.newGetPending(), a.newOpListCommand("operations", "operation", "ops"))
	return get
}

func (a *app) newGetSites() *cobra.Command {
	var f listFlags
	var link string
	cmd := &cobra.Command{
		Use:     "sites [NAME...]",
		Aliases: []string{"site"},
		Short:   "List sites: link state, when last heard from, devices, orphans, site conditions",
		Long: `List every site that has ever connected. LINK is CONNECTED, DISCONNECTED (no
link open, heard from recently) or UNREACHABLE (silent for longer than the
hub's --stale-after: its devices show UNREACHABLE). CONDITIONS lists the site
conditions that are not True (OpenStackAuthenticated, OrphanDetection,
InventoryPolled, ListingConsistent, PolicyGuardArmed).`,
		Example: `  # which site stopped reporting
  ironlink get sites --link disconnected,unreachable
  ironlink get sites -o wide`,
		ValidArgsFunction: a.completeSites,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			links, err := parseEnumList[ironlinkv1.LinkState]("link", link, ironlinkv1.LinkState_value, "LINK_STATE_")
			if err != nil {
				return err
			}
			return a.runListing(cmd, &f, func(ctx context.Context) (*listing, error) {
				return a.fetchSites(ctx, args, links)
			}, "No sites found.")
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&link, "link", "", "only sites whose link is one of: connected, disconnected, unreachable (comma-separated)")
	_ = cmd.RegisterFlagCompletionFunc("link", cobra.FixedCompletions([]string{"connected", "disconnected", "unreachable"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (a *app) fetchSites(ctx context.Context, names []string, links []ironlinkv1.LinkState) (*listing, error) {
	c := a.cl
	cctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.fleet.ListSites(cctx, &ironlinkv1.ListSitesRequest{})
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if !slices.ContainsFunc(r.GetSites(), func(s *ironlinkv1.Site) bool { return s.GetName() == n }) {
			return nil, &Error{Code: ExitNotFound, Msg: fmt.Sprintf("no site %q (see `ironlink get sites`)", n)}
		}
	}
	l := &listing{
		header:     []string{"NAME", "LINK", "DEVICES", "ORPHANS", "CONDITIONS", "LAST-SEEN"},
		wideHeader: []string{"NAME", "LINK", "DEVICES", "ORPHANS", "CONDITIONS", "REPLICA", "VERSION", "CAPABILITIES", "SEQUENCE", "LAST-SEEN"},
	}
	keep := &ironlinkv1.ListSitesResponse{}
	for _, s := range r.GetSites() {
		if len(names) > 0 && !slices.Contains(names, s.GetName()) || len(links) > 0 && !slices.Contains(links, s.GetLinkState()) {
			continue
		}
		keep.Sites = append(keep.Sites, s)
		conds := siteProblems(s)
		seen := a.age(s.GetLastSeenTime())
		l.items = append(l.items, item{
			key:   s.GetName(),
			cells: []string{s.GetName(), linkStateName(s.GetLinkState()), strconv.Itoa(int(s.GetDeviceCount())), strconv.Itoa(int(s.GetInstanceMismatchCount())), conds, seen},
			wide: []string{s.GetName(), linkStateName(s.GetLinkState()), strconv.Itoa(int(s.GetDeviceCount())), strconv.Itoa(int(s.GetInstanceMismatchCount())), conds,
				s.GetReplica(), s.GetSatelliteVersion(), strings.Join(s.GetCapabilities(), ","), strconv.FormatUint(s.GetLastCommittedSequence(), 10), seen},
			name: s.GetName(), msg: s, goneMarker: "(gone)",
			sig: signature(s.GetLinkState(), s.GetDeviceCount(), s.GetInstanceMismatchCount(), conds, s.GetReplica(),
				s.GetSatelliteVersion(), s.GetCapabilities()),
		})
	}
	l.msg = keep
	return l, nil
}

// siteProblems summarizes the site conditions that are not True ("ok" when
// all are, "-" when none were reported).
func siteProblems(s *ironlinkv1.Site) string {
	if len(s.GetConditions()) == 0 {
		return ""
	}
	var bad []string
	for _, c := range s.GetConditions() {
		if c.GetStatus() != ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE {
			bad = append(bad, fmt.Sprintf("%s=%s(%s)", c.GetType(), conditionStatusName(c.GetStatus()), c.GetReason()))
		}
	}
	if len(bad) == 0 {
		return "ok"
	}
	return strings.Join(bad, ",")
}

// deviceFilters are the flags of `get devices`.
type deviceFilters struct {
	site, status, impairment, name string
	orphaned, removed              bool
	// healthWarning is --health-warning.
	healthWarning bool
	// asOf is --as-of (see parseAsOf).
	asOf   string
	labels labelFlags
}

func (a *app) newGetDevices() *cobra.Command {
	var f listFlags
	var df deviceFilters
	cmd := &cobra.Command{
		Use:     "devices [NAME|SITE/NAME|UUID...]",
		Aliases: []string{"device", "dev"},
		Short:   "List devices with their status and why",
		Long: `List devices (all pages) with their operational status and its reason.
QUARANTINE is the desired state an operator set ("quarantined", "released";
"(applying)" until the site has applied it, "(failing)" when the site reported
an error); AGE is the time since the status last changed.

Filters combine (all must match): --site, --status, --impairment, --orphaned,
--health-warning, --name, -l (labels). With device arguments, only those devices are listed.`,
		Example: `  # what is broken now, and why
  ironlink get devices --status faulted,maintenance
  # everything under quarantine, whatever its status
  ironlink get devices --impairment quarantined
  # orphaned Nova instances
  ironlink get devices --orphaned -o wide
  # by name pattern, as JSON
  ironlink get devices --name 'gpu-*' -o json
  # one rack, with every device's labels
  ironlink get devices -l rack=r12 --show-labels
  # keep watching one site
  ironlink get devices --site demo --watch
  # what was faulted at site-b at 03:00 UTC
  ironlink get devices --site site-b --status faulted --as-of 2026-12-01T03:00:00Z`,
		ValidArgsFunction: a.completeDevices,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			req, err := df.request()
			if err != nil {
				return err
			}
			if req.AsOf, err = parseAsOf(df.asOf, a.opts.Now()); err != nil {
				return err
			}
			if req.AsOf != nil && (len(args) > 0 || f.watch) {
				return usageErrf("--as-of lists by filters, without device arguments or --watch (for one device: describe device --as-of)")
			}
			if len(args) > 0 && (df.status != "" || df.impairment != "" || df.orphaned || df.healthWarning || df.name != "" || len(req.Labels) > 0) {
				return usageErrf("give device names or filters (--status, --impairment, --orphaned, --health-warning, --name, -l), not both")
			}
			if req.AsOf != nil {
				// ages count from then, as describe device --as-of counts them
				at := req.AsOf.AsTime()
				a.ageAt = &at
				defer func() { a.ageAt = nil }()
			}
			holders := f.output == outWide && req.AsOf == nil
			return a.runListing(cmd, &f, func(ctx context.Context) (*listing, error) {
				l, err := a.fetchDevices(ctx, req, args, df.site, holders)
				if err == nil && df.labels.show {
					addLabelsColumn(l, l.msg.(*ironlinkv1.ListDevicesResponse).GetDevices())
				}
				return l, err
			}, "No devices found.")
		},
	}
	f.register(cmd)
	df.register(cmd, a)
	return cmd
}

func (df *deviceFilters) register(cmd *cobra.Command, a *app) {
	fl := cmd.Flags()
	fl.StringVar(&df.site, "site", "", "only devices of this site")
	fl.StringVar(&df.status, "status", "", "only devices with one of these statuses, comma-separated (faulted, maintenance, quarantined, unreachable, available, ...)")
	fl.StringVar(&df.impairment, "impairment", "", "only devices whose desired state is one of: quarantined, released, none (never touched)")
	fl.BoolVar(&df.orphaned, "orphaned", false, "only devices with an orphaned Nova instance (Nova and Ironic disagree)")
	fl.BoolVar(&df.healthWarning, "health-warning", false, "only devices with a health warning (a health check failing, not fatal; not with --as-of)")
	fl.StringVar(&df.name, "name", "", "only devices whose name matches this pattern (* and ?; no wildcard: that exact name)")
	fl.BoolVar(&df.removed, "include-removed", false, "also devices that vanished from Ironic")
	fl.StringVar(&df.asOf, "as-of", "", asOfHelp)
	df.labels.register(cmd)
	_ = cmd.RegisterFlagCompletionFunc("site", a.completeSites)
	var statuses []string
	for n, v := range ironlinkv1.OperationalStatus_value {
		if v != 0 {
			statuses = append(statuses, strings.ToLower(strings.TrimPrefix(n, "OPERATIONAL_STATUS_")))
		}
	}
	slices.Sort(statuses)
	_ = cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(statuses, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("impairment", cobra.FixedCompletions([]string{"quarantined", "released", "none"}, cobra.ShellCompDirectiveNoFileComp))
}

// impairmentValues are the impairment states each `--impairment` word
// stands for.
var impairmentValues = map[string][]ironlinkv1.ImpairmentState{
	"quarantined": {ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED},
	"released":    {ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED, ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED_UNOFFERED},
	"none":        {ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_UNSPECIFIED},
}

func (df *deviceFilters) request() (*ironlinkv1.ListDevicesRequest, error) {
	req := &ironlinkv1.ListDevicesRequest{Site: df.site, InstanceMismatch: df.orphaned, HealthWarning: df.healthWarning, IncludeRemoved: df.removed,
		NamePattern: df.name, PageSize: listPageSize}
	var err error
	if req.Statuses, err = parseEnumList[ironlinkv1.OperationalStatus]("status", df.status, ironlinkv1.OperationalStatus_value, "OPERATIONAL_STATUS_"); err != nil {
		return nil, err
	}
	if req.Impairments, err = parseWordList("impairment", df.impairment, impairmentValues, "one or more of quarantined, released, none"); err != nil {
		return nil, err
	}
	if err := df.applySelector(req); err != nil {
		return nil, err
	}
	return req, nil
}

// applySelector narrows req by -l, which reads the --selector syntax
// (internal/devsel): site, status and name become ListDevices' filters
// (a site or name that contradicts --site/--name is refused), any other
// key a label; reason, class and hw. terms are refused, ListDevices
// cannot filter by them (quarantine --selector previews them).
func (df *deviceFilters) applySelector(req *ironlinkv1.ListDevicesRequest) error {
	if strings.TrimSpace(df.labels.selector) == "" {
		return nil
	}
	sel, err := devsel.Parse(df.labels.selector, "-l")
	if err != nil {
		return usageErrf("%s", err)
	}
	if len(sel.GetConditionReasons()) > 0 || sel.GetResourceClass() != "" || len(sel.GetHardwareFacts()) > 0 {
		return usageErrf("-l: get devices filters by site, status, name and labels; reason, class and hw. terms select only in quarantine/release --selector (their preview lists the devices)")
	}
	if s := sel.GetSite(); s != "" {
		if req.Site != "" && req.Site != s {
			return usageErrf("-l site=%s contradicts --site %s", s, req.Site)
		}
		req.Site = s
	}
	if n := sel.GetNamePattern(); n != "" {
		if req.NamePattern != "" && req.NamePattern != n {
			return usageErrf("-l name=%s contradicts --name %s", n, req.NamePattern)
		}
		req.NamePattern = n
	}
	if len(sel.GetStatuses()) > 0 && len(req.Statuses) > 0 {
		return usageErrf("-l status= and --status: give the statuses once")
	}
	req.Statuses = append(req.Statuses, sel.GetStatuses()...)
	req.Labels = sel.GetLabels()
	return nil
}

// fetchDevices lists every page of req, or the named devices; with
// holders, the HELD-BY cell of each quarantined device names its holds
// (one GetDevice each).
func (a *app) fetchDevices(ctx context.Context, req *ironlinkv1.ListDevicesRequest, args []string, site string, holders bool) (*listing, error) {
	c := a.cl
	all := &ironlinkv1.ListDevicesResponse{}
	if len(args) > 0 {
		devs, err := c.resolveDevices(ctx, args, site)
		if err != nil {
			return nil, err
		}
		all.Devices = devs
		for _, d := range all.Devices {
			d.Conditions = nil // as ListDevices answers: conditions are for describe
		}
	} else {
		r := proto.Clone(req).(*ironlinkv1.ListDevicesRequest)
		for {
			cctx, cancel := c.call(ctx)
			page, err := c.fleet.ListDevices(cctx, r)
			cancel()
			if err != nil {
				return nil, err
			}
			all.Devices = append(all.Devices, page.GetDevices()...)
			if r.PageToken = page.GetNextPageToken(); r.PageToken == "" {
				break
			}
		}
	}
	// by site and name, like kubectl (the API pages in device-id order)
	sort.SliceStable(all.Devices, func(i, j int) bool {
		a, b := all.Devices[i], all.Devices[j]
		if a.GetSite() != b.GetSite() {
			return a.GetSite() < b.GetSite()
		}
		return displayName(a) < displayName(b)
	})
	l := &listing{
		header:     []string{"NAME", "SITE", "STATUS", "REASON", "QUARANTINE", "AGE"},
		wideHeader: []string{"NAME", "SITE", "UUID", "STATUS", "REASON", "MESSAGE", "QUARANTINE", "HELD-BY", "GEN", "PROVISION", "POWER", "INSTANCE", "LAST-ERROR", "OBSERVED", "AGE"},
		msg:        all,
	}
	for _, d := range all.GetDevices() {
		age := a.age(d.GetStatusChangeTime())
		gen := ""
		if d.GetDesiredGeneration() > 0 {
			gen = fmt.Sprintf("%d/%d", d.GetAppliedGeneration(), d.GetDesiredGeneration())
		}
		f := d.GetFacts()
		heldBy := ""
		if holders {
			heldBy = a.heldBy(ctx, d)
		}
		l.items = append(l.items, item{
			key:   d.GetDeviceId(),
			cells: []string{displayName(d), d.GetSite(), deviceStatus(d), d.GetStatusReason(), deviceImpairment(d), age},
			wide: []string{displayName(d), d.GetSite(), d.GetDeviceId(), deviceStatus(d), d.GetStatusReason(), d.GetStatusMessage(), deviceImpairment(d), heldBy, gen,
				f.GetProvisionState(), f.GetPowerState(), f.GetInstanceUuid(), d.GetLastCommandError(), a.age(d.GetObservedTime()), age},
			name: qualifiedName(d), msg: d, goneMarker: "(no longer listed)",
			sig: signature(d.GetStatus(), d.GetStatusReason(), d.GetStatusChangeTime().AsTime(), d.GetLastKnownStatus(), d.GetRemoved(),
				deviceImpairment(d), heldBy, gen, f.GetProvisionState(), f.GetPowerState(), f.GetInstanceUuid(), d.GetLastCommandError(), d.GetName(), d.GetStatusMessage()),
		})
	}
	return l, nil
}

func (a *app) newGetCommands() *cobra.Command {
	var f listFlags
	var site, device, state, requestID string
	var limit int
	cmd := &cobra.Command{
		Use:               "commands [COMMAND-ID...]",
		ValidArgsFunction: a.completeIDs(commandIDKind),
		Aliases:           []string{"command", "cmd"},
		Short:             "List quarantine and release commands, newest first",
		Long: `List quarantine and release commands, newest first: STATE is PENDING
(recorded), SENT (on the site's link), SUCCEEDED, FAILED (ERROR says why; the
hub sends it again after a backoff) or SUPERSEDED (a newer command replaced it).`,
		Example: `  ironlink get commands --device node-007
  ironlink get commands --state failed,pending --site demo
  ironlink get commands --request-id 5d0c1f3e-7a2b-4c8d-9e6f-0a1b2c3d4e5f --limit 0   # one --selector request's commands
  ironlink get commands 0b6c7a52-6f0e-4bd4-9d4b-1a7e3c0f2d11 -o yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			states, err := parseEnumList[ironlinkv1.CommandState]("state", state, ironlinkv1.CommandState_value, "COMMAND_STATE_")
			if err != nil {
				return err
			}
			if limit < 0 {
				return usageErrf("--limit %d: want 0 (all) or more", limit)
			}
			return a.runListing(cmd, &f, func(ctx context.Context) (*listing, error) {
				return a.fetchCommands(ctx, args, site, device, requestID, states, limit)
			}, "No commands found.")
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&site, "site", "", "only commands of this site")
	cmd.Flags().StringVar(&device, "device", "", "only commands of this device (NAME, SITE/NAME or UUID)")
	cmd.Flags().StringVar(&state, "state", "", "only commands in one of these states: pending, sent, succeeded, failed, superseded")
	cmd.Flags().StringVar(&requestID, "request-id", "", "only commands created by this bulk request (quarantine/release --selector prints it)")
	cmd.Flags().IntVar(&limit, "limit", 20, "show at most this many (newest first); 0 for all")
	_ = cmd.RegisterFlagCompletionFunc("site", a.completeSites)
	_ = cmd.RegisterFlagCompletionFunc("device", a.completeDevices)
	_ = cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions([]string{"pending", "sent", "succeeded", "failed", "superseded"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// maxNameLookups bounds the GetDevice calls `get commands` makes to show
// device names; beyond it (a bulk request's commands) the names come from
// listing the commands' sites instead, a page of listPageSize per call.
const maxNameLookups = 50

func (a *app) fetchCommands(ctx context.Context, ids []string, site, device, requestID string, states []ironlinkv1.CommandState, limit int) (*listing, error) {
	c := a.cl
	all := &ironlinkv1.ListCommandsResponse{}
	if len(ids) > 0 {
		full, err := c.resolveIDs(ctx, commandIDKind, ids)
		if err != nil {
			return nil, err
		}
		for _, id := range full {
			cctx, cancel := c.call(ctx)
			r, err := c.fleet.GetCommand(cctx, &ironlinkv1.GetCommandRequest{CommandId: id})
			cancel()
			if err != nil {
				return nil, err
			}
			all.Commands = append(all.Commands, r.GetCommand())
		}
	} else {
		req := &ironlinkv1.ListCommandsRequest{Site: site, States: states, RequestId: requestID}
		if device != "" {
			expanded, err := c.expandDevicePrefixes(ctx, []string{device}, site)
			if err != nil {
				return nil, err
			}
			d, err := parseDeviceArg(expanded[0], site)
			if err != nil {
				return nil, err
			}
			req.DeviceId, req.DeviceName, req.Site = d.id, d.name, d.site
		}
		for {
			req.PageSize = listPageSize
			if limit > 0 {
				req.PageSize = int32(min(listPageSize, limit-len(all.Commands)))
			}
			cctx, cancel := c.call(ctx)
			page, err := c.fleet.ListCommands(cctx, req)
			cancel()
			if err != nil {
				return nil, err
			}
			all.Commands = append(all.Commands, page.GetCommands()...)
			if req.PageToken = page.GetNextPageToken(); req.PageToken == "" || limit > 0 && len(all.Commands) >= limit {
				break
			}
		}
	}
	names := a.deviceNames(ctx, all.GetCommands())
	l := &listing{
		header:     []string{"ID", "DEVICE", "SITE", "ACTION", "STATE", "ATTEMPTS", "ACTOR", "REASON", "ERROR", "AGE"},
		wideHeader: []string{"ID", "DEVICE", "DEVICE-UUID", "SITE", "ACTION", "GEN", "STATE", "ATTEMPTS", "ACTOR", "SOURCE", "REASON", "ERROR", "DETAIL", "AGE"},
		msg:        all,
	}
	for _, cm := range all.GetCommands() {
		dev := names[cm.GetDeviceId()]
		if dev == "" {
			dev = cm.GetDeviceId()
		}
		age := a.age(cm.GetCreateTime())
		l.items = append(l.items, item{
			key: cm.GetCommandId(),
			cells: []string{shortID(cm.GetCommandId()), dev, cm.GetSite(), commandAction(cm.GetAction(), cm.GetDesired()), commandStateName(cm.GetState()),
				strconv.Itoa(int(cm.GetAttempts())), cm.GetActor(), truncate(cm.GetReason(), 40), truncate(cm.GetLastError(), 60), age},
			wide: []string{cm.GetCommandId(), dev, cm.GetDeviceId(), cm.GetSite(), commandAction(cm.GetAction(), cm.GetDesired()), strconv.FormatInt(cm.GetGeneration(), 10),
				commandStateName(cm.GetState()), strconv.Itoa(int(cm.GetAttempts())), cm.GetActor(), cm.GetSource(), cm.GetReason(), cm.GetLastError(), cm.GetResultDetail(), age},
			name: cm.GetCommandId(), msg: cm, goneMarker: "(gone)",
			sig: signature(cm.GetState(), cm.GetAttempts(), cm.GetLastError(), cm.GetResultDetail(), dev),
		})
	}
	return l, nil
}

// deviceNames maps the commands' device ids to device names: one GetDevice
// per device for up to maxNameLookups devices, else one listing (removed
// devices included) of each site the commands belong to. A device it cannot
// look up is left out (shown by its UUID).
func (a *app) deviceNames(ctx context.Context, cmds []*ironlinkv1.OperatorCommand) map[string]string {
	out := map[string]string{}
	want := map[string]bool{}
	var sites []string
	for _, cm := range cmds {
		if !want[cm.GetDeviceId()] {
			want[cm.GetDeviceId()] = true
			if !slices.Contains(sites, cm.GetSite()) {
				sites = append(sites, cm.GetSite())
			}
		}
	}
	if len(want) > maxNameLookups {
		for _, site := range sites {
			req := &ironlinkv1.ListDevicesRequest{Site: site, IncludeRemoved: true, PageSize: listPageSize}
			for len(out) < len(want) {
				cctx, cancel := a.cl.call(ctx)
				page, err := a.cl.fleet.ListDevices(cctx, req)
				cancel()
				if err != nil {
					break
				}
				for _, d := range page.GetDevices() {
					if want[d.GetDeviceId()] {
						out[d.GetDeviceId()] = d.GetName()
					}
				}
				if req.PageToken = page.GetNextPageToken(); req.PageToken == "" {
					break
				}
			}
		}
		return out
	}
	for id := range want {
		r, err := a.cl.getDevice(ctx, deviceArg{id: id}, 1)
		if err != nil {
			continue
		}
		out[id] = r.GetDevice().GetName()
	}
	return out
}

// heldBy is the HELD-BY cell of device d: for a quarantined device, its
// quarantine holds as "HOLDER (ACTOR: REASON)", then its exclusion or
// planned maintenance; "" when none, "?" when the holds cannot be read.
func (a *app) heldBy(ctx context.Context, d *ironlinkv1.Device) string {
	var parts []string
	if d.GetDesiredImpairment() == ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED {
		r, err := a.cl.getDevice(ctx, deviceArg{id: d.GetDeviceId()}, 1)
		if err != nil {
			return "?"
		}
		for _, h := range r.GetQuarantineHolds() {
			parts = append(parts, fmt.Sprintf("%s (%s: %s)", h.GetHolder(), h.GetActor(), h.GetReason()))
		}
	}
	for _, h := range d.GetPolicyHolds() {
		parts = append(parts, fmt.Sprintf("%s (%s: %s)", holdKindName(h.GetKind()), h.GetAuthor(), h.GetReason()))
	}
	return strings.Join(parts, "; ")
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

package ctl

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// holdKinds are the words of `holds --kind`, `holds set|clear --kind`.
var holdKinds = map[string]ironlinkv1.DeviceHoldKind{
	"exclusion":   ironlinkv1.DeviceHoldKind_DEVICE_HOLD_KIND_EXCLUSION,
	"maintenance": ironlinkv1.DeviceHoldKind_DEVICE_HOLD_KIND_PLANNED_MAINTENANCE,
}

func holdKindName(k ironlinkv1.DeviceHoldKind) string {
	for w, v := range holdKinds {
		if v == k {
			return w
		}
	}
	return k.String()
}

func parseHoldKind(s string) (ironlinkv1.DeviceHoldKind, error) {
	k, ok := holdKinds[strings.ToLower(strings.TrimSpace(s))]
	if !ok {
		return 0, usageErrf("--kind %q: want exclusion (policy neither quarantines nor releases the device) or maintenance (planned: a MAINTENANCE trigger inside it is skipped)", s)
	}
	return k, nil
}

// newHoldsCommand builds `ironlink holds` (list), `holds set` and `holds
// clear` (PolicyService.SetDeviceHold, ClearDeviceHold).
func (a *app) newHoldsCommand() *cobra.Command {
	var f listFlags
	var site, kind string
	cmd := &cobra.Command{
		Use:     "holds [NAME|SITE/NAME|UUID...]",
		Aliases: []string{"hold"},
		Short:   "List what holds devices: quarantine holds, exclusions from automation, planned maintenance",
		Long: `List every hold on the fleet's devices (or the named ones), one row per hold:
KIND quarantine (HOLDER "operator" or "policy:<rule>": the device is
released only when its last quarantine hold is), exclusion (the quarantine
policy neither quarantines nor releases the device) or maintenance (planned:
a MAINTENANCE trigger inside the window is skipped). Set and clear
exclusions and planned maintenance with ` + "`holds set` and `holds clear`" + `;
quarantine holds come and go with quarantine and release.`,
		Example: `  ironlink holds
  ironlink holds --site demo --kind exclusion
  ironlink holds node-007 -o wide
  ironlink holds set node-007 --kind maintenance --end 4h --reason "PSU swap"
  ironlink holds clear node-007 --kind maintenance`,
		ValidArgsFunction: a.completeDevices,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if kind != "" && kind != "quarantine" {
				if _, err := parseHoldKind(kind); err != nil {
					return usageErrf("--kind %q: want quarantine, exclusion or maintenance", kind)
				}
			}
			return a.runListing(cmd, &f, func(ctx context.Context) (*listing, error) {
				return a.fetchHolds(ctx, args, site, kind)
			}, "No holds.")
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&site, "site", "", "only devices of this site")
	cmd.Flags().StringVar(&kind, "kind", "", "only holds of this kind: quarantine, exclusion or maintenance")
	_ = cmd.RegisterFlagCompletionFunc("site", a.completeSites)
	_ = cmd.RegisterFlagCompletionFunc("kind", cobra.FixedCompletions([]string{"quarantine", "exclusion", "maintenance"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.AddCommand(a.newHoldSetCommand(), a.newHoldClearCommand())
	return cmd
}

// holdDevices lists the devices holds are looked for on: the named ones,
// else every device of site that is quarantined or has a policy hold.
func (a *app) holdDevices(ctx context.Context, args []string, site string) ([]*ironlinkv1.Device, error) {
	c := a.cl
	if len(args) > 0 {
		return c.resolveDevices(ctx, args, site)
	}
	var out []*ironlinkv1.Device
	req := &ironlinkv1.ListDevicesRequest{Site: site, PageSize: listPageSize}
	for {
		cctx, cancel := c.call(ctx)
		page, err := c.fleet.ListDevices(cctx, req)
		cancel()
		if err != nil {
			return nil, err
		}
		for _, d := range page.GetDevices() {
			if len(d.GetPolicyHolds()) > 0 || d.GetDesiredImpairment() == ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED {
				out = append(out, d)
			}
		}
		if req.PageToken = page.GetNextPageToken(); req.PageToken == "" {
			return out, nil
		}
	}
}

func (a *app) fetchHolds(ctx context.Context, args []string, site, kind string) (*listing, error) {
	devs, err := a.holdDevices(ctx, args, site)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(devs, func(x, y *ironlinkv1.Device) int {
		return strings.Compare(qualifiedName(x), qualifiedName(y))
	})
	l := &listing{
		header:     []string{"DEVICE", "SITE", "KIND", "HOLDER", "REASON", "UNTIL", "AGE"},
		wideHeader: []string{"DEVICE", "SITE", "UUID", "KIND", "HOLDER", "SOURCE", "REASON", "FROM", "UNTIL", "AGE"},
		msg:        &ironlinkv1.ListDevicesResponse{Devices: devs},
	}
	for _, d := range devs {
		if (kind == "" || kind == "quarantine") && d.GetDesiredImpairment() == ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED {
			r, err := a.cl.getDevice(ctx, deviceArg{id: d.GetDeviceId()}, 1)
			if err != nil {
				return nil, err
			}
			for _, h := range r.GetQuarantineHolds() {
				age := a.age(h.GetCreateTime())
				l.items = append(l.items, item{key: d.GetDeviceId() + "/q/" + h.GetHolder(),
					cells: []string{displayName(d), d.GetSite(), "quarantine", h.GetHolder() + " (" + h.GetActor() + ")", truncate(h.GetReason(), 50), "", age},
					wide:  []string{displayName(d), d.GetSite(), d.GetDeviceId(), "quarantine", h.GetHolder() + " (" + h.GetActor() + ")", h.GetSource(), h.GetReason(), "", "", age},
					name:  qualifiedName(d), msg: h, goneMarker: "(gone)", sig: signature(h.GetHolder(), h.GetActor(), h.GetReason(), h.GetGeneration()),
				})
			}
		}
		for _, h := range d.GetPolicyHolds() {
			k := holdKindName(h.GetKind())
			if kind != "" && kind != k {
				continue
			}
			until := "until cleared"
			if h.GetEndTime() != nil {
				until = h.GetEndTime().AsTime().UTC().Format(time.RFC3339)
			}
			age := a.age(h.GetCreateTime())
			l.items = append(l.items, item{key: d.GetDeviceId() + "/p/" + k,
				cells: []string{displayName(d), d.GetSite(), k, h.GetAuthor(), truncate(h.GetReason(), 50), until, age},
				wide: []string{displayName(d), d.GetSite(), d.GetDeviceId(), k, h.GetAuthor(), "", h.GetReason(),
					h.GetStartTime().AsTime().UTC().Format(time.RFC3339), until, age},
				name: qualifiedName(d), msg: h, goneMarker: "(cleared)", sig: signature(h.GetAuthor(), h.GetReason(), h.GetStartTime().AsTime(), until),
			})
		}
	}
	return l, nil
}

// parseWhen reads --start/--end: an RFC 3339 time, or a duration after
// base (now for --start, the start for --end). "" is nil.
func parseWhen(flag, s string, base time.Time) (*timestamppb.Timestamp, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return timestamppb.New(t), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return nil, usageErrf("--%s %q: want an RFC 3339 time (2026-12-01T03:00:00Z) or a duration from now (4h, 90m)", flag, s)
	}
	return timestamppb.New(base.Add(d)), nil
}

func (a *app) newHoldSetCommand() *cobra.Command {
	var site, kind, reason, start, end string
	cmd := &cobra.Command{
		Use:   "set NAME|SITE/NAME|UUID... --kind exclusion|maintenance --reason TEXT",
		Short: "Exclude devices from the quarantine policy, or declare their planned maintenance",
		Long: `Set a hold on each device (PolicyService.SetDeviceHold).
It replaces the hold of that kind the device had. exclusion: the quarantine policy neither quarantines nor
releases the device, from --start (default now) until --end or until
cleared. maintenance: a MAINTENANCE trigger between --start and --end
(required) is skipped. Every device is resolved before any hold is set.`,
		Example: `  ironlink holds set node-007 --kind exclusion --reason "burn-in by hand"
  ironlink holds set node-007 node-008 --kind maintenance --end 4h --reason "PSU swap"
  ironlink holds set node-007 --kind maintenance --start 2026-12-05T22:00:00Z --end 2026-12-06T02:00:00Z --reason "firmware"`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: a.completeDevices,
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := parseHoldKind(kind)
			if err != nil {
				return err
			}
			if strings.TrimSpace(reason) == "" {
				return usageErrf("--reason is required: say why (it is kept with the hold)")
			}
			now := a.opts.Now()
			st, err := parseWhen("start", start, now)
			if err != nil {
				return err
			}
			base := now
			if st != nil {
				base = st.AsTime()
			}
			en, err := parseWhen("end", end, base)
			if err != nil {
				return err
			}
			if k == ironlinkv1.DeviceHoldKind_DEVICE_HOLD_KIND_PLANNED_MAINTENANCE && en == nil {
				return usageErrf("--end is required for planned maintenance (a time, or a duration such as 4h)")
			}
			c, devs, err := a.connectAndResolve(cmd.Context(), args, site)
			if err != nil {
				return err
			}
			for _, d := range devs {
				cctx, cancel := c.call(cmd.Context())
				r, err := c.policy.SetDeviceHold(cctx, &ironlinkv1.SetDeviceHoldRequest{DeviceId: d.GetDeviceId(), Kind: k, Reason: reason, StartTime: st, EndTime: en})
				cancel()
				if err != nil {
					return c.explain(err)
				}
				h := r.GetHold()
				until := "until cleared"
				if h.GetEndTime() != nil {
					until = "until " + h.GetEndTime().AsTime().UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(a.opts.Stdout, "%s: %s hold set by %s, from %s %s\n", qualifiedName(d), holdKindName(h.GetKind()), h.GetAuthor(),
					h.GetStartTime().AsTime().UTC().Format(time.RFC3339), until)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&site, "site", "", "the site of a device name used at more than one site")
	cmd.Flags().StringVar(&kind, "kind", "", "exclusion or maintenance (required)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (required)")
	cmd.Flags().StringVar(&start, "start", "", "in force from: an RFC 3339 time or a duration from now (default now)")
	cmd.Flags().StringVar(&end, "end", "", "in force until: an RFC 3339 time or a duration after the start (required for maintenance)")
	_ = cmd.RegisterFlagCompletionFunc("kind", cobra.FixedCompletions([]string{"exclusion", "maintenance"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("site", a.completeSites)
	return cmd
}

func (a *app) newHoldClearCommand() *cobra.Command {
	var site, kind string
	cmd := &cobra.Command{
		Use:               "clear NAME|SITE/NAME|UUID... --kind exclusion|maintenance",
		Short:             "End a device's exclusion from automation or planned maintenance",
		Long:              `End the hold of that kind on each device (PolicyService.ClearDeviceHold). A device without such a hold is "not found" (exit 3).`,
		Example:           `  ironlink holds clear node-007 --kind exclusion`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: a.completeDevices,
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := parseHoldKind(kind)
			if err != nil {
				return err
			}
			c, devs, err := a.connectAndResolve(cmd.Context(), args, site)
			if err != nil {
				return err
			}
			for _, d := range devs {
				cctx, cancel := c.call(cmd.Context())
				_, err := c.policy.ClearDeviceHold(cctx, &ironlinkv1.ClearDeviceHoldRequest{DeviceId: d.GetDeviceId(), Kind: k})
				cancel()
				if err != nil {
					return c.explain(err)
				}
				fmt.Fprintf(a.opts.Stdout, "%s: %s hold cleared\n", qualifiedName(d), holdKindName(k))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&site, "site", "", "the site of a device name used at more than one site")
	cmd.Flags().StringVar(&kind, "kind", "", "exclusion or maintenance (required)")
	_ = cmd.RegisterFlagCompletionFunc("kind", cobra.FixedCompletions([]string{"exclusion", "maintenance"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("site", a.completeSites)
	return cmd
}

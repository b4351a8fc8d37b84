package ctl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/devref"
	"github.com/ironlink/ironlink/internal/wire"
)

// deviceArg is how an operator named a device on the command line: a UUID,
// a name, or SITE/NAME.
type deviceArg struct {
	raw, id, name, site string
}

// parseDeviceArg reads arg as "UUID", "NAME", "SITE/UUID" or "SITE/NAME"
// (internal/devref, as the hub does); site (from --site) applies when the
// argument names none. Errors (usage): empty, malformed (a mistyped UUID is
// refused, not looked up as a name), or two sites that disagree.
func parseDeviceArg(arg, site string) (deviceArg, error) {
	d := deviceArg{raw: arg, site: site}
	s := strings.TrimSpace(arg)
	if s == "" {
		return d, usageErrf("empty device name: give a name, SITE/NAME or UUID")
	}
	r, err := devref.Parse(s)
	if err != nil {
		return d, usageErrf("device %q: %v", arg, err)
	}
	if r.Site != "" {
		if site != "" && site != r.Site {
			return d, usageErrf("device %q names site %q but --site is %q", arg, r.Site, site)
		}
		d.site = r.Site
	}
	d.id, d.name = r.ID, r.Name
	return d, nil
}

// ref is the argument in the canonical form the hub's device lists
// (OperationService's devices and device) take: SITE/NAME or SITE/UUID
// when a site is known, else NAME or UUID.
func (d deviceArg) ref() string {
	return devref.Ref{Site: d.site, ID: d.id, Name: d.name}.String()
}

func (d deviceArg) getRequest(historyLimit int32) *ironlinkv1.GetDeviceRequest {
	return &ironlinkv1.GetDeviceRequest{DeviceId: d.id, DeviceName: d.name, Site: d.site, HistoryLimit: historyLimit}
}

// getDevice fetches the device d names (with up to historyLimit history
// entries; 0 means the hub's default).
func (c *client) getDevice(ctx context.Context, d deviceArg, historyLimit int32) (*ironlinkv1.GetDeviceResponse, error) {
	cctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.fleet.GetDevice(cctx, d.getRequest(historyLimit))
	if err != nil {
		return nil, c.explain(err)
	}
	return r, nil
}

// connectAndResolve connects to the hub and resolves args (device names,
// SITE/NAME or ids, as resolveDevices takes them) at site; the errors are
// connect's and resolveDevices'.
func (a *app) connectAndResolve(ctx context.Context, args []string, site string) (*client, []*ironlinkv1.Device, error) {
	c, err := a.connect()
	if err != nil {
		return nil, nil, err
	}
	devs, err := c.resolveDevices(ctx, args, site)
	return c, devs, err
}

// resolveDevices resolves every argument (a device id prefix too:
// expandDevicePrefixes) before anything is changed, so a typo in the third
// name changes nothing. It returns the devices in
// argument order, without duplicates.
func (c *client) resolveDevices(ctx context.Context, args []string, site string) ([]*ironlinkv1.Device, error) {
	args, err := c.expandDevicePrefixes(ctx, args, site)
	if err != nil {
		return nil, err
	}
	var out []*ironlinkv1.Device
	var seen []string
	for _, a := range args {
		d, err := parseDeviceArg(a, site)
		if err != nil {
			return nil, err
		}
		r, err := c.getDevice(ctx, d, 1)
		if err != nil {
			return nil, err
		}
		if id := r.GetDevice().GetDeviceId(); !slices.Contains(seen, id) {
			seen = append(seen, id)
			out = append(out, r.GetDevice())
		}
	}
	return out, nil
}

// displayName is how tables name a device: its name, else its UUID.
func displayName(d *ironlinkv1.Device) string {
	if d.GetName() != "" {
		return d.GetName()
	}
	return d.GetDeviceId()
}

// qualifiedName is SITE/NAME (SITE/UUID for a nameless device), the form
// -o name prints and every device argument accepts.
func qualifiedName(d *ironlinkv1.Device) string {
	return d.GetSite() + "/" + displayName(d)
}

func statusName(s ironlinkv1.OperationalStatus) string {
	return wire.EnumName(s, "OPERATIONAL_STATUS_")
}

// deviceStatus is the STATUS cell: UNREACHABLE keeps the last known status
// beside it, and removed devices say so.
func deviceStatus(d *ironlinkv1.Device) string {
	s := statusName(d.GetStatus())
	if d.GetStatus() == ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_UNREACHABLE && d.GetLastKnownStatus() != 0 {
		s += " (was " + statusName(d.GetLastKnownStatus()) + ")"
	}
	if d.GetRemoved() {
		s += " (removed)"
	}
	return s
}

// impairmentWords are the words printed for an impairment state: as a
// state ("quarantined") and as the action that asks for it ("quarantine").
var impairmentWords = map[ironlinkv1.ImpairmentState]struct{ state, action string }{
	ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED: {"quarantined", "quarantine"},
	ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED:    {"released", "release"},
	// A release that left the trait absent: the device was not offered
	// before its quarantine.
	ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED_UNOFFERED: {"released (not offered)", "release"},
}

func impairmentName(s ironlinkv1.ImpairmentState) string { return impairmentWords[s].state }

// deviceImpairment is the QUARANTINE cell: the desired state and whether
// the site has applied it ("quarantined", "quarantined (applying)",
// "released (failing)"); "-" when never touched.
func deviceImpairment(d *ironlinkv1.Device) string {
	s := impairmentName(d.GetDesiredImpairment())
	if s == "" {
		return ""
	}
	switch {
	case d.GetLastCommandError() != "":
		s += " (failing)"
	case d.GetAppliedGeneration() < d.GetDesiredGeneration():
		s += " (applying)"
	}
	return s
}

func actionName(s ironlinkv1.ImpairmentState) string { return impairmentWords[s].action }

func commandStateName(s ironlinkv1.CommandState) string {
	return wire.EnumName(s, "COMMAND_STATE_")
}

func conditionStatusName(s ironlinkv1.ConditionStatus) string {
	st, _ := wire.StatusFromProto(s)
	return string(st)
}

func linkStateName(s ironlinkv1.LinkState) string {
	return wire.EnumName(s, "LINK_STATE_")
}

// parseEnumList turns "faulted,maintenance" into enum values by their
// short names (case-insensitive). Errors (usage) list the valid names.
func parseEnumList[E ~int32](flag, list string, names map[string]int32, prefix string, skip ...string) ([]E, error) {
	var valid []string
	for n, v := range names {
		short := strings.ToLower(strings.TrimPrefix(n, prefix))
		if v != 0 && !slices.Contains(skip, short) {
			valid = append(valid, short)
		}
	}
	slices.Sort(valid)
	var out []E
	for _, p := range strings.Split(list, ",") {
		// "in-service" as the selector and the tables spell it, or "in_service".
		p = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(p)), "-", "_")
		if p == "" {
			continue
		}
		v, ok := names[prefix+strings.ToUpper(p)]
		if !ok || v == 0 || slices.Contains(skip, p) {
			return nil, usageErrf("--%s %s: want one or more of %s, comma-separated", flag, p, strings.Join(valid, ", "))
		}
		out = append(out, E(v))
	}
	return out, nil
}

// parseWordList turns a comma-separated list of words (case-insensitive,
// blanks ignored) into the values each word stands for, in order; an
// unknown word is a usage error "--FLAG WORD: want WANT, comma-separated".
func parseWordList[E any](flag, list string, words map[string][]E, want string) ([]E, error) {
	var out []E
	for _, p := range strings.Split(list, ",") {
		w := strings.ToLower(strings.TrimSpace(p))
		if w == "" {
			continue
		}
		vs, ok := words[w]
		if !ok {
			return nil, usageErrf("--%s %s: want %s, comma-separated", flag, p, want)
		}
		out = append(out, vs...)
	}
	return out, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// commandAction is the ACTION word of a command or history entry: its
// recorded action ("quarantine", "release", "release-all-holds",
// "offer"), or for one recorded before actions were, the action that asks
// for its desired state.
func commandAction(a ironlinkv1.ImpairmentAction, desired ironlinkv1.ImpairmentState) string {
	if n := wire.EnumName(a, "IMPAIRMENT_ACTION_"); n != "" {
		return strings.ReplaceAll(strings.ToLower(n), "_", "-")
	}
	return actionName(desired)
}

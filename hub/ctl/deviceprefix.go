package ctl

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/devref"
)

// Devices are named, wherever the CLI takes one, by UUID, NAME, SITE/NAME
// or SITE/UUID, and also, as tables and the web view show ids, by a
// unique prefix of the UUID (at least minIDPrefix hex digits, hyphens
// where the UUID has them, shorter than 30 characters), optionally after
// "SITE/". A device whose name is the prefix wins (the web view's
// getDevice does the same), but a UUID-shaped name ("deadbeef-cafe"),
// which devref lets no one look up by name, is refused naming that
// device's UUID rather than taken for another device's id prefix;
// otherwise the devices whose id starts with it are looked up
// (ListDevices' id_prefix, removed ones included): one is the device,
// several are a usage error listing them, none is "not found". A malformed full UUID stays a usage
// error (internal/devref).

// devicePrefix reports whether s (the part after any "SITE/") may be a
// prefix of a device UUID: minIDPrefix to 29 characters, hex digits with
// hyphens only where a UUID has them (after 8, 12, 16 and 20 digits).
func devicePrefix(s string) bool {
	s = strings.ToLower(s)
	// 30 characters and more are UUID-shaped: a full UUID, or a mistyped
	// one devref refuses
	if len(s) < minIDPrefix || len(s) >= 30 {
		return false
	}
	for i, r := range s {
		hyphen := i == 8 || i == 13 || i == 18 || i == 23
		if hyphen != (r == '-') || !hyphen && !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// expandDevicePrefixes returns args with every device id prefix replaced
// by the full id it names (SITE/UUID when the argument named a site), for
// the parsers that take UUID, NAME, SITE/NAME or SITE/UUID. Other
// arguments are returned as given. Errors: an ambiguous prefix (usage,
// listing the matches), a prefix no device name or id matches (not
// found), the hub's.
func (c *client) expandDevicePrefixes(ctx context.Context, args []string, site string) ([]string, error) {
	var out []string
	for _, arg := range args {
		s := strings.TrimSpace(arg)
		argSite, rest, ok := strings.Cut(s, "/")
		if !ok {
			argSite, rest = site, s
		}
		if !devicePrefix(rest) {
			out = append(out, arg)
			continue
		}
		id, err := c.resolveDevicePrefix(ctx, argSite, rest)
		if err != nil {
			return nil, err
		}
		switch {
		case id == "":
			out = append(out, arg) // a device of that name
		case ok:
			out = append(out, argSite+"/"+id)
		default:
			out = append(out, id)
		}
	}
	return out, nil
}

// resolveDevicePrefix returns "" when a device at site (any site when "")
// is named prefix, else the id of the one device whose id starts with it.
// Errors: as expandDevicePrefixes.
func (c *client) resolveDevicePrefix(ctx context.Context, site, prefix string) (string, error) {
	if devref.LooksLikeUUID(prefix) {
		// A UUID-shaped name ("deadbeef-cafe": 8 hex digits and a
		// hyphen) cannot be looked up by name, yet Ironic allows it:
		// rather than act on another device whose id starts with it,
		// such a device is named by its UUID.
		cctx, cancel := c.call(ctx)
		named, err := c.fleet.ListDevices(cctx, &ironlinkv1.ListDevicesRequest{Site: site, NamePattern: prefix, PageSize: 1})
		cancel()
		if err != nil {
			return "", c.explain(err)
		}
		if ds := named.GetDevices(); len(ds) > 0 {
			return "", usageErrf("%q is the name of device %s/%s and looks like the start of an id: name that device by its UUID, another by more of its id",
				prefix, ds[0].GetSite(), ds[0].GetDeviceId())
		}
	} else {
		// A name may look like an id prefix: the device of that name wins.
		cctx, cancel := c.call(ctx)
		_, err := c.fleet.GetDevice(cctx, &ironlinkv1.GetDeviceRequest{DeviceName: prefix, Site: site, HistoryLimit: 1})
		cancel()
		if status.Code(err) != codes.NotFound {
			// a device of that name, or an error (a name two sites
			// have, the hub unreachable) the name's lookup reports
			return "", nil
		}
	}
	prefix = strings.ToLower(prefix)
	// The hub reads the prefix's range of ids through the primary key, so
	// one page of maxCandidates+1 says none, one or several.
	cctx, cancel := c.call(ctx)
	page, err := c.fleet.ListDevices(cctx, &ironlinkv1.ListDevicesRequest{Site: site, IncludeRemoved: true, IdPrefix: prefix, PageSize: maxCandidates + 1})
	cancel()
	if err != nil {
		return "", c.explain(err)
	}
	var matches []string
	for _, d := range page.GetDevices() {
		matches = append(matches, d.GetSite()+"/"+d.GetDeviceId())
	}
	where := ""
	if site != "" {
		where = " at site " + site
	}
	switch len(matches) {
	case 0:
		return "", &Error{Code: ExitNotFound, Msg: fmt.Sprintf("no device%s is named %q or has an id starting with it (see `ironlink get devices`)", where, prefix)}
	case 1:
		_, id, _ := strings.Cut(matches[0], "/")
		return id, nil
	}
	more := ""
	if len(matches) > maxCandidates {
		matches, more = matches[:maxCandidates], ", ..."
	}
	return "", usageErrf("device id prefix %q is ambiguous: it matches %s%s (give more characters)", prefix, strings.Join(matches, ", "), more)
}

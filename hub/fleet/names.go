package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/devref"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// ReasonDeviceNameAmbiguous is the ErrorInfo reason (domain grpcerr.Domain)
// of InvalidArgument for a device_name several devices share; its metadata
// "candidates" holds "site/device_id" pairs, comma-separated. An unknown
// device_name is NotFound with reason grpcerr.ReasonNotFound, a ResourceInfo
// and metadata "suggestions": similar names, comma-separated (may be empty).
// See fleet.proto "Naming a device".
const ReasonDeviceNameAmbiguous = grpcerr.ReasonDeviceNameAmbiguous

const (
	maxDeviceNameBytes      = 255 // Ironic's limit on node names
	maxNamePatternBytes     = 256
	maxSuggestions          = 3
	suggestionCandidatePool = 500
)

// deviceRef is how a request names a device: by UUID, or by name within an
// optional site.
type deviceRef struct {
	id, name, site string
}

// resolveDevice returns the canonical UUID of the device ref names.
// Errors: InvalidArgument (neither or both of id and name, a malformed id, a
// bad site, an ambiguous name: ErrorInfo DEVICE_NAME_AMBIGUOUS with the
// candidates), NotFound (unknown id or name: ErrorInfo DEVICE_NOT_FOUND
// with similar names), Unavailable (database).
func (s *Server) resolveDevice(ctx context.Context, ref deviceRef) (string, error) {
	if err := checkSiteFilter(ref.site); err != nil {
		return "", err
	}
	ref, err := splitDeviceName(ref)
	if err != nil {
		return "", err
	}
	// A site the caller may not use, named outright, is refused as a site
	// filter is (PermissionDenied, logged), before the name is looked up.
	if err := s.checkSiteAllowed(ctx, callerScope(ctx), ref.site); err != nil {
		return "", err
	}
	switch {
	case ref.id != "" && ref.name != "":
		return "", grpcerr.InvalidArgument("device_name", grpcerr.ReasonInvalidValue, "give device_id or device_name, not both")
	case ref.id == "" && ref.name == "":
		return "", grpcerr.InvalidArgument("device_id", grpcerr.ReasonRequired, "device_id or device_name is required")
	case ref.id != "":
		id, err := parseID("device_id", ref.id)
		if err != nil || ref.site == "" {
			return id, err
		}
		site, err := s.store.DeviceSite(ctx, id)
		if err != nil {
			return "", s.storeErr(err, "device", id)
		}
		// A device of a site the caller may not use is refused without
		// saying where it is.
		if sc := callerScope(ctx); !sc.Allows(site) {
			return "", s.deny(ctx, sc, "device "+id, site)
		}
		if site != ref.site {
			return "", grpcerr.NotFound("device", id, fmt.Sprintf("device %s is not at site %q (it is at %q)", id, ref.site, site))
		}
		return id, nil
	}
	if err := textcheck.Line("device_name", ref.name, maxDeviceNameBytes); err != nil {
		return "", grpcerr.FromCheck(err)
	}
	refs, err := s.store.DevicesByName(ctx, ref.name, ref.site)
	if err != nil {
		return "", s.storeErr(err, "", "")
	}
	// An operator bound to sites resolves names among its sites only: a
	// name used elsewhere is neither a candidate nor a hint.
	if sc := callerScope(ctx); sc.Bound() {
		refs = slices.DeleteFunc(refs, func(r store.DeviceRef) bool { return !sc.Allows(r.Site) })
	}
	switch len(refs) {
	case 1:
		return refs[0].ID, nil
	case 0:
		return "", s.nameNotFound(ctx, ref)
	}
	cands := make([]string, len(refs))
	for i, r := range refs {
		cands[i] = r.Site + "/" + r.ID
	}
	msg := fmt.Sprintf("device name %q is used by %d devices (%s): give the site or the device_id", ref.name, len(refs), strings.Join(cands, ", "))
	if ref.site != "" {
		msg = fmt.Sprintf("device name %q is used by %d devices at site %q (%s): give the device_id", ref.name, len(refs), ref.site, strings.Join(cands, ", "))
	}
	return "", grpcerr.AmbiguousDeviceName(msg, cands)
}

// splitDeviceName reads a device_name in the forms every device argument
// takes (internal/devref): "NAME", "SITE/NAME", and a UUID or "SITE/UUID",
// which stand for device_id. A site in the name must agree with the
// request's site. Errors: InvalidArgument naming device_name.
func splitDeviceName(ref deviceRef) (deviceRef, error) {
	if ref.name == "" || (!strings.Contains(ref.name, "/") && !devref.LooksLikeUUID(ref.name) && len(ref.name) != 32) {
		return ref, nil
	}
	if err := textcheck.Line("device_name", ref.name, maxDeviceNameBytes+64); err != nil {
		return ref, grpcerr.FromCheck(err)
	}
	r, err := devref.Parse(ref.name)
	if err != nil {
		reason := grpcerr.ReasonInvalidValue
		if de := (*devref.Error)(nil); errors.As(err, &de) && de.NotUUID {
			reason = grpcerr.ReasonNotUUID
		}
		return ref, grpcerr.InvalidArgument("device_name", reason, fmt.Sprintf("device_name %s: %v", textcheck.Quote(ref.name), err))
	}
	if r.Site != "" {
		if ref.site != "" && ref.site != r.Site {
			return ref, grpcerr.InvalidArgument("device_name", grpcerr.ReasonInvalidValue, fmt.Sprintf("device_name %s names site %q, but site is %q", textcheck.Quote(ref.name), r.Site, ref.site))
		}
		ref.site = r.Site
	}
	if r.ID != "" {
		if ref.id != "" {
			return ref, grpcerr.InvalidArgument("device_name", grpcerr.ReasonInvalidValue, "give device_id or device_name, not both")
		}
		ref.id, ref.name = r.ID, ""
		return ref, nil
	}
	ref.name = r.Name
	return ref, nil
}

// nameNotFound builds the NotFound status for an unknown name, with up to
// maxSuggestions similar names (in the message and the ErrorInfo).
func (s *Server) nameNotFound(ctx context.Context, ref deviceRef) error {
	where := ""
	if ref.site != "" {
		where = fmt.Sprintf(" at site %q", ref.site)
	}
	var sugg []string
	// No suggestions for an operator bound to sites: the candidates may be
	// other sites' device names, which are not the caller's to see.
	if !callerScope(ctx).Bound() {
		if names, err := s.store.NameCandidates(ctx, ref.name, ref.site, suggestionCandidatePool); err == nil {
			sugg = Suggest(ref.name, names, maxSuggestions)
		} else {
			s.log.Warn("device name suggestions", "err", err)
		}
	}
	msg := fmt.Sprintf("no device named %q%s", ref.name, where)
	if len(sugg) > 0 {
		msg += "; did you mean " + strings.Join(sugg, ", ") + "?"
	}
	return grpcerr.DeviceNameNotFound(ref.name, msg, sugg)
}

// idPrefixRange turns ListDevicesRequest's id_prefix into the range of
// canonical UUIDs it covers, lowest and highest ("", "" for an empty
// prefix). Errors: InvalidArgument naming id_prefix for more than 36
// characters, a character that is not a hex digit, or a hyphen missing or
// misplaced (a UUID has them after 8, 13, 18 and 23 characters).
func idPrefixRange(prefix string) (from, to string, err error) {
	if prefix == "" {
		return "", "", nil
	}
	const lo, hi = "00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff"
	p := strings.ToLower(prefix)
	bad := len(p) > len(lo)
	for i := 0; i < len(p) && !bad; i++ {
		if lo[i] == '-' {
			bad = p[i] != '-'
		} else {
			bad = !strings.ContainsRune("0123456789abcdef", rune(p[i]))
		}
	}
	if bad {
		return "", "", grpcerr.InvalidArgument("id_prefix", grpcerr.ReasonInvalidValue,
			fmt.Sprintf("id_prefix %s is not the start of a UUID (hex digits, hyphens after 8, 13, 18 and 23 characters, at most 36)", textcheck.Quote(prefix)))
	}
	return p + lo[len(p):], p + hi[len(p):], nil
}

// nameFilters turns ListDevicesRequest's name_prefix and name_pattern into
// the store's LIKE patterns. Errors: InvalidArgument.
func nameFilters(prefix, pattern string) (string, string, error) {
	if err := textcheck.Line("name_prefix", prefix, maxDeviceNameBytes); err != nil {
		return "", "", grpcerr.FromCheck(err)
	}
	if err := textcheck.Line("name_pattern", pattern, maxNamePatternBytes); err != nil {
		return "", "", grpcerr.FromCheck(err)
	}
	var a, b string
	if prefix != "" {
		a = store.LikePrefix(prefix)
	}
	if pattern != "" {
		var err error
		if b, err = store.GlobToLike(pattern); err != nil {
			return "", "", grpcerr.InvalidArgument("name_pattern", grpcerr.ReasonInvalidValue, "name_pattern: "+err.Error())
		}
	}
	if a == "" {
		a, b = b, ""
	}
	return a, b, nil
}

// Suggest returns up to n of candidates closest to name by edit distance
// (Levenshtein, over runes, case-insensitive), nearest first then by name,
// keeping only those within max(2, len(name)/3) edits. name itself is never
// suggested.
func Suggest(name string, candidates []string, n int) []string {
	type scored struct {
		s string
		d int
	}
	limit := max(2, utf8.RuneCountInString(name)/3)
	var out []scored
	for _, c := range slices.Compact(slices.Sorted(slices.Values(candidates))) {
		if c == name || c == "" {
			continue
		}
		if d := editDistance(strings.ToLower(name), strings.ToLower(c)); d <= limit {
			out = append(out, scored{c, d})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].d < out[j].d })
	res := []string{}
	for i := 0; i < len(out) && i < n; i++ {
		res = append(res, out[i].s)
	}
	return res
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

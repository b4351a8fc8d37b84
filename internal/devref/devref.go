// Package devref reads how an operator names a device, in the forms
// docs/reference/api.md ("Naming a device") and docs/reference/cli.md
// document: "UUID", "NAME", "SITE/UUID" or "SITE/NAME". The hub's API
// (hub/fleet, hub/operations) and the CLI (hub/ctl) share it, so that every
// place that names a device accepts the same forms and refuses the same
// others.
package devref

import (
	"strings"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/internal/sitename"
)

// Ref is a parsed device reference: exactly one of ID and Name is set; Site
// is set when the reference named one ("SITE/...").
type Ref struct {
	// Site is the site the reference names, "" when none.
	Site string
	// ID is the canonical (lower-case, hyphenated) node UUID.
	ID string
	// Name is the Ironic node name.
	Name string
}

// Error is a reference Parse refuses; Msg says why, without the input.
// NotUUID is set when the reference was refused as a malformed UUID.
type Error struct {
	Msg     string
	NotUUID bool
}

func (e *Error) Error() string { return e.Msg }

// Parse reads s as "UUID", "NAME", "SITE/UUID" or "SITE/NAME". Ironic node
// names are letters, digits and "-._~" (no '/'), so the first '/' ends the
// site. A string shaped like a UUID (only hex digits and '-', at least 30
// of them, or 8 hex digits and a '-' followed only by hex digits and '-')
// that is not one is refused rather than taken for a name: a mistyped id
// gets "not a UUID", not "no device named". Errors (*Error): an empty
// reference, an empty or invalid site or name part, a second '/', a
// malformed UUID.
func Parse(s string) (Ref, error) {
	var r Ref
	if s == "" {
		return r, &Error{Msg: "empty device reference: give a UUID, NAME, SITE/NAME or SITE/UUID"}
	}
	rest := s
	if site, after, ok := strings.Cut(s, "/"); ok {
		switch {
		case site == "" || after == "":
			return r, &Error{Msg: "want SITE/NAME or SITE/UUID, with both parts"}
		case strings.Contains(after, "/"):
			return r, &Error{Msg: "a device reference has at most one '/' (SITE/NAME)"}
		case !sitename.Valid(site):
			return r, &Error{Msg: "the part before '/' is not a site name (lower-case letters, digits and '-', 1-63 bytes)"}
		}
		r.Site, rest = site, after
	}
	if id, err := uuid.Parse(rest); err == nil && (len(rest) == 36 || len(rest) == 32) {
		r.ID = id.String()
		return r, nil
	}
	if LooksLikeUUID(rest) {
		return r, &Error{Msg: "not a UUID (8-4-4-4-12 hex digits), and node names are not UUID-shaped", NotUUID: true}
	}
	r.Name = rest
	return r, nil
}

// LooksLikeUUID reports whether s is shaped like a node UUID without
// necessarily being one: only hex digits and '-', and either at least 30
// bytes long or starting with 8 hex digits and a '-'.
func LooksLikeUUID(s string) bool {
	if s == "" || strings.Trim(s, "0123456789abcdefABCDEF-") != "" {
		return false
	}
	if len(s) >= 30 {
		return true
	}
	return len(s) > 9 && s[8] == '-' && !strings.Contains(s[:8], "-")
}

// String renders r in the form Parse reads.
func (r Ref) String() string {
	v := r.Name
	if r.ID != "" {
		v = r.ID
	}
	if r.Site != "" {
		return r.Site + "/" + v
	}
	return v
}

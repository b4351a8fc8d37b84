package openstack

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Microversion is an OpenStack API microversion "MAJOR.MINOR" (API-SIG
// microversion guideline; Ironic api-ref "API versions", Placement api-ref
// "Microversions").
type Microversion struct {
	// Major is the major version (1 for Ironic and Placement today).
	Major int
	// Minor is the microversion within the major version.
	Minor int
}

// ParseMicroversion parses "1.65" (an optional leading "v" is accepted, as in
// "v1.0" ids). It returns an error for anything else, including "" and
// "latest".
func ParseMicroversion(s string) (Microversion, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "v")
	maj, mnr, ok := strings.Cut(t, ".")
	if !ok {
		return Microversion{}, fmt.Errorf("microversion %q: want MAJOR.MINOR", s)
	}
	a, err := strconv.Atoi(maj)
	if err != nil || a < 0 {
		return Microversion{}, fmt.Errorf("microversion %q: bad major %q", s, maj)
	}
	b, err := strconv.Atoi(mnr)
	if err != nil || b < 0 {
		return Microversion{}, fmt.Errorf("microversion %q: bad minor %q", s, mnr)
	}
	return Microversion{a, b}, nil
}

// MustMicroversion is ParseMicroversion for constants; it panics on a bad string.
func MustMicroversion(s string) Microversion {
	v, err := ParseMicroversion(s)
	if err != nil {
		panic(err)
	}
	return v
}

// String renders "MAJOR.MINOR".
func (v Microversion) String() string { return strconv.Itoa(v.Major) + "." + strconv.Itoa(v.Minor) }

// IsZero reports whether v is the zero value (not negotiated).
func (v Microversion) IsZero() bool { return v == Microversion{} }

// Less reports whether v is older than o.
func (v Microversion) Less(o Microversion) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	return v.Minor < o.Minor
}

// AtLeast reports whether v is o or newer.
func (v Microversion) AtLeast(o Microversion) bool { return !v.Less(o) }

// Microversion bounds the satellite uses (docs/design/openstack.md §1.1, §3.1, §6).
var (
	// IronicPreferred is the newest Ironic microversion requested: every node
	// field the conditions need (lessee arrived in 1.65).
	IronicPreferred = Microversion{1, 65}
	// IronicRequired is the oldest Ironic microversion accepted: node traits
	// (GET/PUT/DELETE /v1/nodes/{id}/traits and the traits field) are 1.37.
	IronicRequired = Microversion{1, 37}
	// PlacementPreferred is the newest Placement microversion requested.
	PlacementPreferred = Microversion{1, 39}
	// PlacementRequired is the oldest Placement microversion accepted
	// (resource-provider traits are 1.6).
	PlacementRequired = Microversion{1, 6}
)

// VersionRange is what a service's version document advertises for one
// major version: the oldest and newest microversion it accepts.
type VersionRange struct {
	// Min is the oldest microversion the server accepts.
	Min Microversion
	// Max is the newest microversion the server accepts.
	Max Microversion
}

// Negotiate picks min(r.Max, preferred) and checks it is at least required
// and at least r.Min. It returns an error naming the service otherwise.
func (r VersionRange) Negotiate(service string, preferred, required Microversion) (Microversion, error) {
	v := preferred
	if r.Max.Less(v) {
		v = r.Max
	}
	if v.Less(required) {
		return Microversion{}, fmt.Errorf("%s: server offers microversions %s..%s, the satellite needs at least %s", service, r.Min, r.Max, required)
	}
	if v.Less(r.Min) {
		return Microversion{}, fmt.Errorf("%s: server's oldest microversion %s is newer than the satellite's newest %s", service, r.Min, v)
	}
	return v, nil
}

// versionDoc covers the version documents of Ironic ("GET /" and "GET /v1")
// and Placement ("GET /"):
//
//	Ironic  /v1: {"id":"v1", "version":{"id":"v1","version":"1.82","min_version":"1.1",...}, ...}
//	Ironic  /  : {"versions":[{"id":"v1","version":"1.82","min_version":"1.1"}], "default_version":{...}}
//	Placement /: {"versions":[{"id":"v1.0","max_version":"1.39","min_version":"1.0","status":"CURRENT"}]}
type versionDoc struct {
	ID             string         `json:"id"`
	Version        *versionEntry  `json:"version"`
	Versions       []versionEntry `json:"versions"`
	DefaultVersion *versionEntry  `json:"default_version"`
}

type versionEntry struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	Version    string `json:"version"`
	MaxVersion string `json:"max_version"`
	MinVersion string `json:"min_version"`
}

func (e versionEntry) rng() (VersionRange, bool) {
	maxS := e.MaxVersion
	if maxS == "" {
		maxS = e.Version
	}
	hi, err := ParseMicroversion(maxS)
	if err != nil {
		return VersionRange{}, false
	}
	lo, err := ParseMicroversion(e.MinVersion)
	if err != nil {
		lo = Microversion{hi.Major, 0}
	}
	return VersionRange{Min: lo, Max: hi}, true
}

// ParseVersionDocument extracts the microversion range for the given major
// version from a version document body (any of the shapes Ironic and
// Placement serve, see above). It returns an error when no entry of that
// major version carries a parsable maximum.
func ParseVersionDocument(body []byte, major int) (VersionRange, error) {
	var d versionDoc
	if err := json.Unmarshal(body, &d); err != nil {
		return VersionRange{}, fmt.Errorf("version document: %w", err)
	}
	var cands []versionEntry
	if d.Version != nil {
		cands = append(cands, *d.Version)
	}
	cands = append(cands, d.Versions...)
	if d.DefaultVersion != nil {
		cands = append(cands, *d.DefaultVersion)
	}
	for _, e := range cands {
		r, ok := e.rng()
		if !ok || r.Max.Major != major {
			continue
		}
		return r, nil
	}
	return VersionRange{}, fmt.Errorf("version document has no microversion range for major version %d", major)
}

// APICall is one OpenStack request the satellite makes, in the form of a
// Keystone application-credential access rule (docs/design/openstack.md §5.1, §5.2):
// service type, HTTP method, and path as the service sees it with "*" for
// one variable segment. The deploy/ access-rules file is kept in step with
// the union of the packages' APICalls tables.
type APICall struct {
	// Service is the catalog service type: "baremetal", "placement".
	Service string `json:"service"`
	// Method is the HTTP method, e.g. "GET".
	Method string `json:"method"`
	// Path is the request path with "*" for a variable segment, e.g.
	// "/v1/nodes/*/traits/*".
	Path string `json:"path"`
}

// APICalls lists the requests Connect makes besides Keystone: the version
// documents (served without authentication in stock deployments, listed
// for completeness). gophercloud's endpoint lookup reads the service roots,
// Connect reads Ironic's "/v1" (falling back to "/") and Placement's "/".
func APICalls() []APICall {
	return append(Calls("baremetal", "GET /\nGET /v1"), Calls("placement", "GET /")...)
}

// Calls builds the access rules of one catalog service from a table of
// requests, one a line, written as in an access-rules file: "METHOD /path",
// "*" for a variable segment (Keystone API reference, "Application
// Credentials": access_rules). Blank lines and the white space around a
// request are ignored. It panics on a line that is not an upper-case
// method, white space and an absolute path: the tables are constants of
// the program, and a typo in one must fail its package's tests, not a
// satellite in production.
func Calls(service, table string) []APICall {
	var out []APICall
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 || f[0] != strings.ToUpper(f[0]) || !strings.HasPrefix(f[1], "/") {
			panic(fmt.Sprintf("openstack.Calls(%q): line %q: want \"METHOD /path\"", service, line))
		}
		out = append(out, APICall{Service: service, Method: f[0], Path: f[1]})
	}
	return out
}

// ValidateTraitName checks a trait name against the os-traits rules shared
// by Ironic and Placement: 1–255 characters of [A-Z0-9_]. When custom is
// true it must also start with "CUSTOM_" (Placement api-ref "Update
// Traits": only custom traits can be created).
func ValidateTraitName(name string, custom bool) error {
	if name == "" || len(name) > 255 {
		return fmt.Errorf("trait name %q: want 1 to 255 characters", name)
	}
	for _, r := range name {
		if (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '_' {
			return fmt.Errorf("trait name %q: only A-Z, 0-9 and _ are allowed", name)
		}
	}
	if custom && (!strings.HasPrefix(name, "CUSTOM_") || len(name) == len("CUSTOM_")) {
		return fmt.Errorf("trait name %q: a custom trait starts with CUSTOM_", name)
	}
	return nil
}

package auth

import (
	"bytes"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/go-jose/go-jose/v4"
	"go.yaml.in/yaml/v3"

	"github.com/ironlink/ironlink/internal/filewatch"
	"github.com/ironlink/ironlink/internal/sitename"
)

// SatellitePrefix starts every satellite's client id: a satellite of site S
// is the client "ironlink-agent-S".
const SatellitePrefix = "ironlink-agent-"

var (
	clientIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`)
	kidRe      = regexp.MustCompile(`^[A-Za-z0-9._:+=-]{1,128}$`)
)

// SatelliteClientID returns the client id of the satellite of site.
func SatelliteClientID(site string) string { return SatellitePrefix + site }

// Roster is the set of clients allowed to call the hub: satellites (one per
// site, bound to it) and operators. A Roster is immutable once loaded and safe
// for concurrent use; a new file gives a new Roster (see RosterWatcher).
type Roster struct {
	clients map[string]*Client
	ids     []string // sorted
}

// Client is one roster entry. Do not modify a Client obtained from a Roster.
type Client struct {
	// ID is the OAuth client id: the "iss" and "sub" of its assertions.
	ID string
	// Site is the site a satellite is bound to; empty for operators.
	Site string
	// Sites are the sites an operator may read and change (roster "sites");
	// nil means every site. Always nil for a satellite, which is bound to
	// Site.
	Sites []string
	// Scopes the client holds (each one of AllScopes), in roster order.
	Scopes []string
	// Keys are the client's public keys; more than one during a rotation.
	Keys []Key
}

// Key is one public key of a client.
type Key struct {
	// KID is the key id ("kid" JWS header, RFC 7515 §4.1.4), unique per client.
	KID string
	// Algorithm is the one JWS alg the key implies (see AlgorithmFor).
	Algorithm string
	// Public is an *ecdsa.PublicKey (P-256), *rsa.PublicKey or ed25519.PublicKey.
	Public crypto.PublicKey
}

// IsSatellite reports whether c is bound to one site: a satellite or a
// health checker (has a site).
func (c *Client) IsSatellite() bool { return c.Site != "" }

// HasScope reports whether c holds scope.
func (c *Client) HasScope(scope string) bool { return slices.Contains(c.Scopes, scope) }

// Key returns the key with id kid.
func (c *Client) Key(kid string) (Key, bool) {
	for _, k := range c.Keys {
		if k.KID == kid {
			return k, true
		}
	}
	return Key{}, false
}

// Client returns the client with id, or nil when the roster has none.
func (r *Roster) Client(id string) *Client {
	if r == nil {
		return nil
	}
	return r.clients[id]
}

// Clients returns every client, sorted by id.
func (r *Roster) Clients() []*Client {
	if r == nil {
		return nil
	}
	out := make([]*Client, 0, len(r.ids))
	for _, id := range r.ids {
		out = append(out, r.clients[id])
	}
	return out
}

// StillAuthorized reports whether id, authenticated earlier (perhaps under
// an older roster), is still allowed under r to use scope: the client still
// exists with the same site, still has the key id.KeyID, and holds scope (an
// empty scope skips that last check). The hub calls it for each open link
// when the roster changes and closes the links it returns false for.
func (r *Roster) StillAuthorized(id Identity, scope string) bool {
	c := r.Client(id.ClientID)
	if c == nil || c.Site != id.Site {
		return false
	}
	if _, ok := c.Key(id.KeyID); !ok {
		return false
	}
	return scope == "" || c.HasScope(scope)
}

// Removed lists what lost access between old and new, sorted:
//
//   - "<client id>" for a client that is gone, whose site changed, or that
//     lost any scope;
//   - "<client id>/<kid>" for each key removed from a client that is
//     otherwise unchanged (a rotation finishing).
//
// Either roster may be nil (an empty roster).
func Removed(old, new *Roster) []string {
	var out []string
	for _, oc := range old.Clients() {
		nc := new.Client(oc.ID)
		if nc == nil || nc.Site != oc.Site || slices.ContainsFunc(oc.Scopes, func(s string) bool { return !nc.HasScope(s) }) ||
			lostSites(oc.Sites, nc.Sites) {
			out = append(out, oc.ID)
			continue
		}
		for _, k := range oc.Keys {
			if nk, ok := nc.Key(k.KID); !ok || !sameKey(nk.Public, k.Public) {
				out = append(out, oc.ID+"/"+k.KID)
			}
		}
	}
	slices.Sort(out)
	return out
}

// lostSites reports whether an operator allowed old sites (nil: every
// site) is allowed fewer under new.
func lostSites(old, new []string) bool {
	if new == nil {
		return false
	}
	return old == nil || slices.ContainsFunc(old, func(s string) bool { return !slices.Contains(new, s) })
}

// rosterFile is the YAML shape: the satellites/operators section of
// deploy/charts/hub/values.yaml. Other top-level keys are ignored, so the
// chart's whole values.yaml is a valid roster file too; inside an entry every
// key must be known.
type rosterFile struct {
	Satellites     *[]clientEntry `yaml:"satellites"`
	Operators      *[]clientEntry `yaml:"operators"`
	HealthCheckers *[]clientEntry `yaml:"healthCheckers"`
	Other          map[string]any `yaml:",inline"`
}

type clientEntry struct {
	ClientID string     `yaml:"clientId"`
	Site     string     `yaml:"site"`
	Sites    *[]string  `yaml:"sites"`
	Scopes   []string   `yaml:"scopes"`
	Keys     []keyEntry `yaml:"keys"`
}

type keyEntry struct {
	KID          string    `yaml:"kid"`
	PublicKeyPEM string    `yaml:"publicKeyPEM"`
	JWK          yaml.Node `yaml:"jwk"`
}

// LoadRoster reads and validates the roster file at path (see ParseRoster).
// Errors start with the path.
func LoadRoster(path string) (*Roster, error) {
	return filewatch.ReadConfig(path, "roster", ParseRoster)
}

// ParseRoster parses and validates a roster document:
//
//	satellites:
//	  - clientId: ironlink-agent-site-a     # must be ironlink-agent-<site>
//	    site: site-a                        # [a-z0-9-], 1-63 bytes
//	    scopes: [device:update, device-condition:create]
//	    keys:
//	      - kid: 2026-11
//	        publicKeyPEM: |                 # PKIX "PUBLIC KEY" PEM, or
//	          -----BEGIN PUBLIC KEY-----
//	          ...
//	      - kid: 2027-05
//	        jwk: {"kty":"OKP","crv":"Ed25519","x":"..."}   # a public JWK (RFC 7517)
//	healthCheckers:                         # bound to their site as satellites are
//	  - clientId: gpu-monitor-site-a        # any id but ironlink-agent-*
//	    site: site-a
//	    scopes: [device-health:create]      # the only scope a checker holds
//	    keys: [...]
//	operators:
//	  - clientId: ops-console
//	    scopes: [operations:read, operations:write]
//	    keys: [...]
//	  - clientId: ops-site-a                # bound to sites: sees and changes
//	    sites: [site-a]                     # only these; absent = every site
//	    scopes: [operations:read, operations:write]
//	    keys: [...]
//
// At least one of satellites/operators/healthCheckers must be present
// (possibly empty). A health checker needs a valid site and holds only
// device-health:create.
// Every problem found is reported (joined with errors.Join), each naming the
// entry: a duplicate client id, a satellite without a site or with an invalid
// site name or a client id other than ironlink-agent-<site> or with sites, an
// operator with a site or a site scope (SiteScopes) or named like a
// satellite, an operator's sites list that is empty, holds an invalid site
// name or names a site twice, an unknown
// scope, a key that is missing, unparsable, private, of an unsupported type
// or registered for two clients, a kid missing or duplicated within a client.
// Messages never include key material.
func ParseRoster(data []byte) (*Roster, error) {
	var f rosterFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("parse YAML: %w", err)
	}
	if f.Satellites == nil && f.Operators == nil && f.HealthCheckers == nil {
		return nil, errors.New("no satellites: or operators: section (write `satellites: []` for an empty roster)")
	}
	b := &rosterBuilder{r: &Roster{clients: map[string]*Client{}}}
	if f.Satellites != nil {
		for i, e := range *f.Satellites {
			b.add("satellites", i, e, kindSatellite)
		}
	}
	if f.Operators != nil {
		for i, e := range *f.Operators {
			b.add("operators", i, e, kindOperator)
		}
	}
	if f.HealthCheckers != nil {
		for i, e := range *f.HealthCheckers {
			b.add("healthCheckers", i, e, kindChecker)
		}
	}
	if len(b.errs) > 0 {
		return nil, errors.Join(b.errs...)
	}
	slices.Sort(b.r.ids)
	return b.r, nil
}

// rosterBuilder collects a roster's clients, entry by entry, and every
// problem found (ParseRoster).
type rosterBuilder struct {
	r    *Roster
	errs []error
	// keys are the public keys of the clients added so far, to refuse one
	// key registered for two clients.
	keys []keyOwner
}

// keyOwner is a public key of the roster and the client and kid it is
// registered as.
type keyOwner struct {
	client, kid string
	pub         crypto.PublicKey
}

// failFunc records a problem of the entry being added.
type failFunc func(format string, args ...any)

// clientKind is the roster section an entry is in.
type clientKind int

const (
	kindSatellite clientKind = iota
	kindOperator
	// kindChecker is a health checker: bound to its site as a satellite
	// is, holding device-health:create only.
	kindChecker
)

// add checks entry i of section (a satellite, an operator or a health
// checker) and adds its client to the roster when nothing is wrong with
// it; each problem is recorded in b.errs, naming the entry.
func (b *rosterBuilder) add(section string, i int, e clientEntry, kind clientKind) {
	where := fmt.Sprintf("%s[%d]", section, i)
	if clientIDRe.MatchString(e.ClientID) {
		where += " " + e.ClientID
	}
	fail := func(format string, args ...any) {
		b.errs = append(b.errs, fmt.Errorf("%s: %w", where, fmt.Errorf(format, args...)))
	}
	n := len(b.errs)
	switch {
	case e.ClientID == "":
		fail("clientId is required")
	case !clientIDRe.MatchString(e.ClientID):
		fail("clientId %q is invalid: 1-128 of [A-Za-z0-9._:@-], starting with a letter or digit", e.ClientID)
	case b.r.clients[e.ClientID] != nil:
		fail("duplicate client id")
	}
	switch kind {
	case kindSatellite:
		checkSatelliteBinding(e, fail)
	case kindOperator:
		checkOperatorBinding(e, fail)
	case kindChecker:
		checkCheckerBinding(e, fail)
	}
	checkScopes(e.Scopes, kind, fail)
	c := &Client{ID: e.ClientID, Site: e.Site, Scopes: slices.Clone(e.Scopes)}
	if e.Sites != nil && kind == kindOperator {
		c.Sites = slices.Clone(*e.Sites)
	}
	b.addKeys(c, e.Keys, fail)
	if len(b.errs) > n {
		return
	}
	for _, k := range c.Keys {
		b.keys = append(b.keys, keyOwner{c.ID, k.KID, k.Public})
	}
	b.r.clients[c.ID] = c
	b.r.ids = append(b.r.ids, c.ID)
}

// checkBoundSite checks the site of a client bound to one site (who, e.g.
// "a satellite"): required and valid; and that it has no operator's sites
// list. It reports whether the site itself is valid.
func checkBoundSite(e clientEntry, who string, fail failFunc) bool {
	ok := false
	switch {
	case e.Site == "":
		fail("site is required for %s", who)
	case !sitename.Valid(e.Site):
		fail("site %q is invalid: [a-z0-9-], 1-63 bytes, no leading or trailing '-'", e.Site)
	default:
		ok = true
	}
	if e.Sites != nil {
		fail("%s is bound to its site: sites is for operators", who)
	}
	return ok
}

// checkSatelliteBinding checks a satellite's site: required, valid, the
// one its client id names, and no operator's sites list.
func checkSatelliteBinding(e clientEntry, fail failFunc) {
	if checkBoundSite(e, "a satellite", fail) && e.ClientID != "" && e.ClientID != SatelliteClientID(e.Site) {
		fail("a satellite of site %s must be named %s", e.Site, SatelliteClientID(e.Site))
	}
}

// checkCheckerBinding checks a health checker's site: required and valid,
// no satellite's client id, no operator's sites list.
func checkCheckerBinding(e clientEntry, fail failFunc) {
	checkBoundSite(e, "a health checker", fail)
	if strings.HasPrefix(e.ClientID, SatellitePrefix) {
		fail("client ids starting with %s are reserved for satellites", SatellitePrefix)
	}
}

// checkOperatorBinding checks an operator's binding: no site, no
// satellite's client id, and a sites list (when given) of valid, distinct
// site names.
func checkOperatorBinding(e clientEntry, fail failFunc) {
	if e.Site != "" {
		fail("an operator has no site (satellites go under satellites:)")
	}
	if strings.HasPrefix(e.ClientID, SatellitePrefix) {
		fail("client ids starting with %s are reserved for satellites", SatellitePrefix)
	}
	if e.Sites == nil {
		return
	}
	if len(*e.Sites) == 0 {
		fail("sites is empty: list the sites the operator may use, or leave sites out for every site")
	}
	seen := map[string]bool{}
	for _, site := range *e.Sites {
		switch {
		case !sitename.Valid(site):
			fail("sites: %q is invalid: [a-z0-9-], 1-63 bytes, no leading or trailing '-'", site)
		case seen[site]:
			fail("sites: %s listed twice", site)
		}
		seen[site] = true
	}
}

// checkScopes checks an entry's scopes: known, distinct, the satellites'
// site scopes for satellites only, and device-health:create alone for
// health checkers (which may not hold any other).
func checkScopes(scopes []string, kind clientKind, fail failFunc) {
	seen := map[string]bool{}
	for _, s := range scopes {
		switch {
		case !ValidScope(s):
			fail("unknown scope %q: want one of %s", s, strings.Join(AllScopes, ", "))
		case seen[s]:
			fail("scope %s listed twice", s)
		case kind == kindChecker && s != ScopeDeviceHealthCreate:
			fail("scope %s: a health checker holds %s only", s, ScopeDeviceHealthCreate)
		case kind == kindOperator && s == ScopeDeviceHealthCreate:
			fail("scope %s acts on one site's devices: only health checkers and satellites may hold it", s)
		case kind == kindOperator && slices.Contains(SiteScopes, s):
			fail("scope %s acts on one site's devices: only satellites may hold it", s)
		}
		seen[s] = true
	}
}

// addKeys parses an entry's keys into c.Keys, refusing a kid or a public
// key listed twice for c, and a public key already registered for another
// client.
func (b *rosterBuilder) addKeys(c *Client, keys []keyEntry, fail failFunc) {
	for j, ke := range keys {
		k, err := parseKeyEntry(ke)
		if err != nil {
			fail("keys[%d]: %w", j, err)
			continue
		}
		if _, dup := c.Key(k.KID); dup {
			fail("keys[%d]: duplicate kid %q", j, k.KID)
			continue
		}
		for _, o := range b.keys {
			if sameKey(o.pub, k.Public) {
				fail("keys[%d] (kid %q): the same public key is already registered as %s kid %q; each client needs its own key", j, k.KID, o.client, o.kid)
			}
		}
		for _, o := range c.Keys {
			if sameKey(o.Public, k.Public) {
				fail("keys[%d] (kid %q): the same public key is already listed as kid %q", j, k.KID, o.KID)
			}
		}
		c.Keys = append(c.Keys, k)
	}
}

// parseKeyEntry turns one roster key into a Key. Errors never include key material.
func parseKeyEntry(ke keyEntry) (Key, error) {
	hasPEM := strings.TrimSpace(ke.PublicKeyPEM) != ""
	hasJWK := ke.JWK.Kind != 0 && !(ke.JWK.Kind == yaml.ScalarNode && ke.JWK.Tag == "!!null")
	switch {
	case hasPEM && hasJWK:
		return Key{}, errors.New("give publicKeyPEM or jwk, not both")
	case !hasPEM && !hasJWK:
		return Key{}, errors.New("publicKeyPEM or jwk is required")
	}
	if hasPEM {
		if ke.KID == "" {
			return Key{}, errors.New("kid is required")
		}
		if !kidRe.MatchString(ke.KID) {
			return Key{}, fmt.Errorf("kid %q is invalid: 1-128 of [A-Za-z0-9._:+=-]", ke.KID)
		}
		pub, alg, err := ParsePublicKeyPEM([]byte(ke.PublicKeyPEM))
		if err != nil {
			return Key{}, fmt.Errorf("kid %q: bad publicKeyPEM: %w", ke.KID, err)
		}
		return Key{KID: ke.KID, Algorithm: alg, Public: pub}, nil
	}
	// jwk: a JSON string, or a YAML/JSON mapping.
	var raw []byte
	if ke.JWK.Kind == yaml.ScalarNode {
		raw = []byte(ke.JWK.Value)
	} else {
		var m map[string]any
		if err := ke.JWK.Decode(&m); err != nil {
			return Key{}, fmt.Errorf("kid %q: bad jwk: not a JSON object", ke.KID)
		}
		b, err := json.Marshal(m)
		if err != nil {
			return Key{}, fmt.Errorf("kid %q: bad jwk: not a JSON object", ke.KID)
		}
		raw = b
	}
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(raw); err != nil {
		return Key{}, fmt.Errorf("kid %q: bad jwk: %s", ke.KID, sanitizeJOSEError(err))
	}
	if !jwk.IsPublic() {
		return Key{}, fmt.Errorf("kid %q: jwk holds a private key: put only the public key in the roster", ke.KID)
	}
	kid := ke.KID
	switch {
	case kid == "" && jwk.KeyID == "":
		return Key{}, errors.New("kid is required (in the entry or in the jwk)")
	case kid == "":
		kid = jwk.KeyID
	case jwk.KeyID != "" && jwk.KeyID != kid:
		return Key{}, fmt.Errorf("kid %q: the jwk says kid %q", kid, jwk.KeyID)
	}
	if !kidRe.MatchString(kid) {
		return Key{}, fmt.Errorf("kid %q is invalid: 1-128 of [A-Za-z0-9._:+=-]", kid)
	}
	alg, err := AlgorithmFor(jwk.Key)
	if err != nil {
		return Key{}, fmt.Errorf("kid %q: bad jwk: %w", kid, err)
	}
	if jwk.Algorithm != "" && jwk.Algorithm != alg {
		return Key{}, fmt.Errorf("kid %q: jwk alg %q does not match the key type (%s)", kid, jwk.Algorithm, alg)
	}
	if jwk.Use != "" && jwk.Use != "sig" {
		return Key{}, fmt.Errorf("kid %q: jwk use %q: want sig", kid, jwk.Use)
	}
	return Key{KID: kid, Algorithm: alg, Public: jwk.Key}, nil
}

// sanitizeJOSEError keeps go-jose's message but drops anything after a
// colon-quoted value, so no key bytes end up in an error.
func sanitizeJOSEError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "go-jose/go-jose: ")
	if i := strings.IndexAny(msg, "\"'{"); i >= 0 {
		msg = strings.TrimRight(msg[:i], " :")
	}
	if len(msg) > 120 {
		msg = msg[:120]
	}
	return msg
}

// FormatRosterEntry renders a roster entry for one client with one key, in
// the YAML shape ParseRoster reads (one list item, indented for the
// satellites: or operators: list). A non-empty site makes it a satellite
// entry. It is what `ironlink-hub keygen` prints.
func FormatRosterEntry(clientID, site string, scopes []string, kid string, pub crypto.PublicKey) (string, error) {
	p, err := PublicKeyPEM(pub)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  - clientId: %s\n", clientID)
	if site != "" {
		fmt.Fprintf(&b, "    site: %s\n", site)
	}
	fmt.Fprintf(&b, "    scopes: [%s]\n", strings.Join(scopes, ", "))
	fmt.Fprintf(&b, "    keys:\n      - kid: %q\n        publicKeyPEM: |\n", kid)
	for _, line := range strings.Split(strings.TrimRight(p, "\n"), "\n") {
		fmt.Fprintf(&b, "          %s\n", line)
	}
	return b.String(), nil
}

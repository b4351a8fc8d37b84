package conditions

import (
	"fmt"
	"strings"

	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/openstack"
)

// Selector picks the nodes of a site's validation pool (SPEC
// "InValidationPool"). Empty fields are not checked; a zero Selector means
// the site has no pool.
type Selector struct {
	// ResourceClass must equal the node's resource_class (exact).
	ResourceClass string
	// Trait must be among the node's traits.
	Trait string
	// Owner must equal the node's owner project id (exact).
	Owner string
	// ConductorGroup must equal the node's conductor_group (case-insensitive;
	// Ironic lower-cases it).
	ConductorGroup string
}

// Selector keys in flag syntax, in canonical order.
const (
	KeyResourceClass  = "resource_class"
	KeyTrait          = "trait"
	KeyOwner          = "owner"
	KeyConductorGroup = "conductor_group"
)

// ParseSelector parses the flag syntax "key=value[,key=value...]" with keys
// resource_class, trait, owner and conductor_group, e.g.
// "resource_class=gpu-h100,conductor_group=pool". Spaces around keys and
// values are ignored. "" (or only spaces) is the zero Selector (no pool).
// Errors: a part without "=", an unknown or repeated key, an empty value,
// or an invalid trait name.
func ParseSelector(s string) (Selector, error) {
	var sel Selector
	if strings.TrimSpace(s) == "" {
		return sel, nil
	}
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok {
			return Selector{}, fmt.Errorf("validation-pool selector %q: %q is not key=value", s, strings.TrimSpace(part))
		}
		if v == "" {
			return Selector{}, fmt.Errorf("validation-pool selector %q: empty value for %s", s, k)
		}
		if seen[k] {
			return Selector{}, fmt.Errorf("validation-pool selector %q: %s given twice", s, k)
		}
		seen[k] = true
		switch k {
		case KeyResourceClass:
			sel.ResourceClass = v
		case KeyTrait:
			if err := openstack.ValidateTraitName(v, false); err != nil {
				return Selector{}, fmt.Errorf("validation-pool selector %q: %w", s, err)
			}
			sel.Trait = v
		case KeyOwner:
			sel.Owner = v
		case KeyConductorGroup:
			sel.ConductorGroup = v
		default:
			return Selector{}, fmt.Errorf("validation-pool selector %q: unknown key %q (want %s, %s, %s or %s)",
				s, k, KeyResourceClass, KeyTrait, KeyOwner, KeyConductorGroup)
		}
	}
	return sel, nil
}

// IsZero reports whether the selector checks nothing (no pool).
func (s Selector) IsZero() bool { return s == Selector{} }

// String renders the selector in canonical flag syntax ("" for zero);
// ParseSelector(s.String()) == s.
func (s Selector) String() string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	add(KeyResourceClass, s.ResourceClass)
	add(KeyTrait, s.Trait)
	add(KeyOwner, s.Owner)
	add(KeyConductorGroup, s.ConductorGroup)
	return strings.Join(parts, ",")
}

// Match checks n against the selector: match is true when every set key
// matches. When no set key is known to mismatch but some need a field the
// node does not have (ironic.Node.Missing), unavailable names the first
// such Ironic field and match is false.
func (s Selector) Match(n ironic.Node) (match bool, unavailable string) {
	match = true
	check := func(want, field string, ok func() bool) {
		if want == "" || !match {
			return
		}
		if n.Missing[field] {
			if unavailable == "" {
				unavailable = field
			}
			return
		}
		if !ok() {
			match = false
		}
	}
	check(s.ResourceClass, "resource_class", func() bool { return n.ResourceClass == s.ResourceClass })
	check(s.Trait, "traits", func() bool { return n.HasTrait(s.Trait) })
	check(s.Owner, "owner", func() bool { return n.Owner == s.Owner })
	check(s.ConductorGroup, "conductor_group", func() bool { return strings.EqualFold(n.ConductorGroup, s.ConductorGroup) })
	if !match {
		return false, ""
	}
	if unavailable != "" {
		return false, unavailable
	}
	return true, ""
}

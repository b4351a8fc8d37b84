package labels

import (
	"fmt"
	"slices"
	"strings"
)

// Sources are the Ironic node fields a label may come from besides
// "extra.KEY" and "properties.KEY" (docs/reference/labels.md).
var Sources = []string{"conductor_group", "owner", "lessee", "resource_class"}

// Rule maps one Ironic node field to one label key.
type Rule struct {
	// Key is the label key ("rack").
	Key string
	// Source is the node field: "extra.KEY", "properties.KEY" or one of
	// Sources.
	Source string
}

// Mapping is a site's label mapping (the satellite's --label-map), in the
// order given; keys are unique.
type Mapping []Rule

// ParseMapping parses "rack=extra.rack,row=properties.row,group=conductor_group":
// comma-separated KEY=SOURCE terms, KEY a valid label key given once,
// SOURCE "extra.K", "properties.K" (K any non-empty Ironic key without a
// comma) or one of Sources. An empty text is no mapping.
func ParseMapping(text string) (Mapping, error) {
	var m Mapping
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	seen := map[string]bool{}
	for _, term := range strings.Split(text, ",") {
		k, src, ok := strings.Cut(strings.TrimSpace(term), "=")
		if !ok {
			return nil, fmt.Errorf("label map term %q: want KEY=SOURCE (e.g. rack=extra.rack)", term)
		}
		if !ValidKey(k) {
			return nil, fmt.Errorf("label map term %q: key %q is not a label key (1 to %d of [A-Za-z0-9._-])", term, k, MaxBytes)
		}
		if seen[k] {
			return nil, fmt.Errorf("label map: key %q given twice", k)
		}
		seen[k] = true
		if !validSource(src) {
			return nil, fmt.Errorf("label map term %q: source %q: want extra.KEY, properties.KEY or one of %s", term, src, strings.Join(Sources, ", "))
		}
		m = append(m, Rule{Key: k, Source: src})
	}
	if len(m) > MaxPerDevice {
		return nil, fmt.Errorf("label map: %d keys, at most %d", len(m), MaxPerDevice)
	}
	return m, nil
}

func validSource(src string) bool {
	for _, p := range []string{"extra.", "properties."} {
		if k, ok := strings.CutPrefix(src, p); ok {
			return k != ""
		}
	}
	return slices.Contains(Sources, src)
}

// String renders m in ParseMapping's syntax.
func (m Mapping) String() string {
	parts := make([]string, len(m))
	for i, r := range m {
		parts[i] = r.Key + "=" + r.Source
	}
	return strings.Join(parts, ",")
}

// Apply returns the labels m gives a node whose fields lookup answers
// (lookup(source) → value, present). A field absent or empty gives no
// label; a value that is not a valid label value is left out too and its
// key returned in bad (so the caller can say so once). nil when none.
func (m Mapping) Apply(lookup func(source string) (string, bool)) (set map[string]string, bad []string) {
	for _, r := range m {
		v, ok := lookup(r.Source)
		v = strings.TrimSpace(v)
		if !ok || v == "" {
			continue
		}
		if !ValidValue(v) {
			bad = append(bad, r.Key)
			continue
		}
		if set == nil {
			set = map[string]string{}
		}
		set[r.Key] = v
	}
	return set, bad
}

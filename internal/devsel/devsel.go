// Package devsel reads the device selector syntax of the CLI's
// `quarantine --selector` / `release --selector` and the fleet view's
// selector filter (docs/reference/cli.md "Bulk quarantine and release"):
// comma-separated key=value terms with keys site, status, reason, class
// (or resource-class) and name, hw.FACT for a hardware fact, and any
// other key for a failure-domain label (rack=r12); status and reason may repeat or list
// values separated by '|'. A value holding a comma, a '|', a double quote
// or leading or trailing spaces is written as a Go/JSON double-quoted
// string (hw.cpu_model="Xeon, rev 2"), which Format does. Both read it
// here, so they accept the same selectors and refuse the same others with
// the same messages.
package devsel

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/labels"
)

// Parse reads s into a BulkService DeviceSelector. Statuses are
// case-insensitive operational status names (faulted, in-service, ...).
// what names the input in messages ("--selector" in the CLI, "selector"
// in the fleet view). Errors: a term without key=value, an unknown key or
// status, a single-valued key given twice, a selector that selects
// nothing; each message names the term.
func Parse(s, what string) (*ironlinkv1.DeviceSelector, error) {
	sel := &ironlinkv1.DeviceSelector{}
	terms, err := split(s)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", what, s, err)
	}
	for _, term := range terms {
		term = strings.TrimSpace(term)
		if term == "" {
			continue
		}
		if err := addTerm(sel, term, what); err != nil {
			return nil, err
		}
	}
	if sel.Site == "" && len(sel.Statuses) == 0 && len(sel.ConditionReasons) == 0 && sel.ResourceClass == "" && sel.NamePattern == "" &&
		len(sel.HardwareFacts) == 0 && len(sel.Labels) == 0 {
		return nil, fmt.Errorf("%s %q selects nothing: give at least one of site, status, reason, class, name or a label", what, s)
	}
	return sel, nil
}

// split cuts s at the commas outside double-quoted values.
func split(s string) ([]string, error) {
	var terms []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++ // the escaped character
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			terms = append(terms, s[start:i])
			start = i + 1
		}
	}
	if quoted {
		return nil, fmt.Errorf("a double-quoted value is not closed")
	}
	return append(terms, s[start:]), nil
}

// value trims v and, when it is double-quoted, unquotes it (quoted: true).
func value(term, v string) (string, bool, error) {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, `"`) {
		return v, false, nil
	}
	u, err := strconv.Unquote(v)
	if err != nil {
		return "", false, fmt.Errorf("term %q: %s is not a double-quoted string (\\\" and \\\\ escape)", term, v)
	}
	return u, true, nil
}

func addTerm(sel *ironlinkv1.DeviceSelector, term, what string) error {
	k, v, ok := strings.Cut(term, "=")
	v, quoted, err := value(term, v)
	if err != nil {
		return fmt.Errorf("%s %w", what, err)
	}
	if fact, isHW := hardwareKey(k); isHW && ok {
		if sel.HardwareFacts == nil {
			sel.HardwareFacts = map[string]string{}
		}
		sel.HardwareFacts[fact] = v
		return nil
	}
	raw := strings.TrimSpace(k) // a label key keeps its case
	k = strings.ToLower(raw)
	// values listed with '|' unless the value was quoted
	values := func() []string {
		if quoted {
			return []string{v}
		}
		return strings.Split(v, "|")
	}
	if !ok || v == "" {
		return fmt.Errorf("%s term %q: want key=value (keys: site, status, reason, class, name, hw.FACT, or a label such as rack)", what, term)
	}
	once := func(dst *string) error {
		if *dst != "" {
			return fmt.Errorf("%s: %s given twice", what, k)
		}
		*dst = v
		return nil
	}
	switch k {
	case "site":
		return once(&sel.Site)
	case "class", "resource-class", "resource_class":
		return once(&sel.ResourceClass)
	case "name":
		return once(&sel.NamePattern)
	case "status":
		for _, x := range values() {
			name := "OPERATIONAL_STATUS_" + strings.ReplaceAll(strings.ToUpper(strings.TrimSpace(x)), "-", "_")
			st, ok := ironlinkv1.OperationalStatus_value[name]
			if !ok || st == 0 {
				return fmt.Errorf("%s: unknown status %q (faulted, maintenance, quarantined, available, in-service, ...)", what, x)
			}
			sel.Statuses = append(sel.Statuses, ironlinkv1.OperationalStatus(st))
		}
	case "reason":
		for _, x := range values() {
			sel.ConditionReasons = append(sel.ConditionReasons, strings.TrimSpace(x))
		}
	default: // any other key is a label (docs/reference/labels.md)
		if _, dup := sel.Labels[raw]; dup {
			return fmt.Errorf("%s: label %s given twice", what, raw)
		}
		if err := labels.Check(what, map[string]string{raw: v}); err != nil {
			return err
		}
		if sel.Labels == nil {
			sel.Labels = map[string]string{}
		}
		sel.Labels[raw] = v
	}
	return nil
}

// Format writes sel back in the syntax Parse reads (statuses lower-case
// with '-', values of a key joined by '|').
func Format(sel *ironlinkv1.DeviceSelector) string {
	var parts []string
	if sel.GetSite() != "" {
		parts = append(parts, "site="+quote(sel.GetSite()))
	}
	if len(sel.GetStatuses()) > 0 {
		sts := make([]string, len(sel.GetStatuses()))
		for i, st := range sel.GetStatuses() {
			sts[i] = strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(st.String(), "OPERATIONAL_STATUS_")), "_", "-")
		}
		parts = append(parts, "status="+strings.Join(sts, "|"))
	}
	for _, r := range sel.GetConditionReasons() {
		parts = append(parts, "reason="+quote(r))
	}
	if sel.GetResourceClass() != "" {
		parts = append(parts, "class="+quote(sel.GetResourceClass()))
	}
	if sel.GetNamePattern() != "" {
		parts = append(parts, "name="+quote(sel.GetNamePattern()))
	}
	facts := make([]string, 0, len(sel.GetHardwareFacts()))
	for k := range sel.GetHardwareFacts() {
		facts = append(facts, k)
	}
	sort.Strings(facts)
	if len(sel.GetLabels()) > 0 {
		parts = append(parts, labels.String(sel.GetLabels()))
	}
	for _, k := range facts {
		parts = append(parts, "hw."+k+"="+quote(sel.GetHardwareFacts()[k]))
	}
	return strings.Join(parts, ",")
}

// quote double-quotes v when Parse would not read it back as it is.
func quote(v string) string {
	if v == "" || strings.ContainsAny(v, ",|\"") || v != strings.TrimSpace(v) {
		return strconv.Quote(v)
	}
	return v
}

// hardwareKey reports whether a selector key names a hardware fact
// ("hw.gpu_count", case-insensitive prefix) and returns the fact's name.
func hardwareKey(k string) (string, bool) {
	k = strings.TrimSpace(k)
	if len(k) > 3 && strings.EqualFold(k[:3], "hw.") {
		return k[3:], true
	}
	return "", false
}

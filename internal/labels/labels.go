// Package labels is the failure-domain label vocabulary both ends share
// (issue 22 item 5; docs/reference/labels.md): what a label key and value
// may be, how many a device carries, and the selector terms that match
// them ("rack=r12").
package labels

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/ironlink/ironlink/internal/textcheck"
)

// MaxPerDevice is the most labels one device carries; a satellite mapping
// or a labels file giving more is refused.
const MaxPerDevice = 32

// MaxBytes is the longest key or value, in bytes.
const MaxBytes = 63

var nameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`)

// ValidKey reports whether k is a label key: 1 to 63 bytes of
// [A-Za-z0-9._-], starting and ending with a letter or digit (as a
// Kubernetes label name), for example "rack" or "power-feed".
func ValidKey(k string) bool { return nameRE.MatchString(k) }

// ValidValue reports whether v is a label value: the same rule as a key
// ("r12", "pdu-a.2").
func ValidValue(v string) bool { return nameRE.MatchString(v) }

// Check returns an error naming the first bad key or value of set (in
// key order), or a set with more than MaxPerDevice labels; where names the
// field.
func Check(where string, set map[string]string) error {
	if len(set) > MaxPerDevice {
		return fmt.Errorf("%s: %d labels, at most %d", where, len(set), MaxPerDevice)
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if !ValidKey(k) {
			return fmt.Errorf("%s: key %s: want 1 to %d of [A-Za-z0-9._-], starting and ending with a letter or digit", where, textcheck.Quote(k), MaxBytes)
		}
		if !ValidValue(set[k]) {
			return fmt.Errorf("%s.%s: value %s: want 1 to %d of [A-Za-z0-9._-], starting and ending with a letter or digit", where, k, textcheck.Quote(set[k]), MaxBytes)
		}
	}
	return nil
}

// String renders set as "k1=v1,k2=v2" in key order ("" when empty): the
// selector syntax, and the form the CLI shows.
func String(set map[string]string) string {
	parts := make([]string, 0, len(set))
	for _, k := range slices.Sorted(maps.Keys(set)) {
		parts = append(parts, k+"="+set[k])
	}
	return strings.Join(parts, ",")
}

// Matches reports whether set has every key of sel with the same value
// (an empty sel matches every set).
func Matches(set, sel map[string]string) bool {
	for k, v := range sel {
		if got, ok := set[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Package sitename validates site names, which both ends of the link and the
// roster use: lower-case letters, digits and '-', 1-63 bytes, starting and
// ending with a letter or digit (a DNS label, RFC 1123 §2.1).
package sitename

import (
	"fmt"
	"regexp"
)

var re = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Valid reports whether s is a valid site name.
func Valid(s string) bool { return re.MatchString(s) }

// Check returns an error naming s when it is not a valid site name.
func Check(s string) error {
	if !Valid(s) {
		return fmt.Errorf("site name %q is invalid: use lower-case letters, digits and '-', 1-63 bytes, starting and ending with a letter or digit", s)
	}
	return nil
}

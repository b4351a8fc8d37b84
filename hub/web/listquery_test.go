package web

import "testing"

// TestParseOffset: ?offset= takes plain digits within 0-maxListOffset; a
// sign, a space or anything else is refused rather than read leniently.
func TestParseOffset(t *testing.T) {
	for v, want := range map[string]int{"": 0, "0": 0, "100": 100} {
		if got, err := parseOffset(v); err != nil || got != want {
			t.Errorf("parseOffset(%q) = %d, %v; want %d", v, got, err, want)
		}
	}
	for _, v := range []string{"+5", "-1", " 5", "5x", "1e3", "99999999999999999999"} {
		if got, err := parseOffset(v); err == nil {
			t.Errorf("parseOffset(%q) = %d, want an error", v, got)
		}
	}
}

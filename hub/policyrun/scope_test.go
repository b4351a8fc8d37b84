package policyrun

import (
	"slices"
	"testing"

	"github.com/ironlink/ironlink/hub/policy"
)

// The scope of a pass is the sites whose policy is enabled, with the
// default off (the sites that turn it on) and on (all but those that turn
// it off); off everywhere it names none.
func TestEnabledScope(t *testing.T) {
	on, off := true, false
	for _, tc := range []struct {
		name   string
		file   *policy.File
		except bool
		sites  []string
		none   bool
	}{
		{"off everywhere", &policy.File{Sites: map[string]policy.Override{"site-a": {}}}, false, nil, true},
		{"on for site-b", &policy.File{Sites: map[string]policy.Override{"site-a": {Enabled: &off}, "site-b": {Enabled: &on}}},
			false, []string{"site-b"}, false},
		{"on but for site-b", &policy.File{Default: policy.SitePolicy{Enabled: true},
			Sites: map[string]policy.Override{"site-a": {Enabled: &on}, "site-b": {Enabled: &off}}}, true, []string{"site-b"}, false},
		{"on everywhere", &policy.File{Default: policy.SitePolicy{Enabled: true}}, true, nil, false},
	} {
		sc := enabledScope(tc.file)
		if sc.Except != tc.except || !slices.Equal(sc.Sites, tc.sites) || sc.None() != tc.none {
			t.Errorf("%s: scope %+v (none %v), want except=%v sites %v (none %v)", tc.name, sc, sc.None(), tc.except, tc.sites, tc.none)
		}
	}
}

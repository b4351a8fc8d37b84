package version

import "testing"

func TestString(t *testing.T) {
	cases := []struct {
		name, version, commit, want string
	}{
		{"stamped", "v1.2.3", "0123abc", "v1.2.3 (commit 0123abc)"},
		{"describe output", "v1.2.3-4-g0123abc-dirty", "0123abcdef", "v1.2.3-4-g0123abc-dirty (commit 0123abcdef)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			Version, Commit = tc.version, tc.commit
			defer func() { Version, Commit = "dev", "" }()
			if got := String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

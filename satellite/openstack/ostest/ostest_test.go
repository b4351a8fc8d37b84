package ostest

import "testing"

func TestServiceRequired(t *testing.T) {
	for _, tc := range []struct {
		requireReal, novaIronic string
		placement, nova         bool
	}{
		{"", "", false, false},
		{"0", "1", false, false},
		{"1", "", true, true},
		{"1", "1", true, true},
		{"1", "0", true, false}, // only Nova's absence may be declared
	} {
		t.Setenv(EnvRequireReal, tc.requireReal)
		t.Setenv(EnvNovaIronic, tc.novaIronic)
		if got := ServiceRequired("Placement"); got != tc.placement {
			t.Errorf("REQUIRE_REAL=%q NOVA_IRONIC=%q: Placement required %v, want %v", tc.requireReal, tc.novaIronic, got, tc.placement)
		}
		if got := ServiceRequired("Nova"); got != tc.nova {
			t.Errorf("REQUIRE_REAL=%q NOVA_IRONIC=%q: Nova required %v, want %v", tc.requireReal, tc.novaIronic, got, tc.nova)
		}
	}
}

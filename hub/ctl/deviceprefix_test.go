package ctl

import "testing"

func TestDevicePrefixShapes(t *testing.T) {
	for s, want := range map[string]bool{
		"6b1c":                                true,
		"6B1C1C7E":                            true,
		"6b1c1c7e-":                           true,
		"6b1c1c7e-3f0a":                       true,
		"6b1c1c7e-3f0a-4d3e-9d33-2d5a":        true,
		"6b1c1c7e3f0a":                        false, // a digit where a hyphen goes (the hub refuses it)
		"6b1":                                 false, // too short
		"node-007":                            false,
		"6b1c1c7e3-f0a":                       false, // a hyphen out of place
		"6b1c1c7e-3f0a4":                      false, // a digit where a hyphen goes
		"6b1c1c7e-3f0a-4d3e-9d33-2d5a1f":      false, // 30 characters: UUID-shaped
		"6b1c1c7e-3f0a-4d3e-9d33-2d5a1f1e0a1": false, // a mistyped UUID
		"6b1c1c7e3f0a4d3e9d332d5a1f1e0a":      false,
	} {
		if got := devicePrefix(s); got != want {
			t.Errorf("devicePrefix(%q) = %v, want %v", s, got, want)
		}
	}
}

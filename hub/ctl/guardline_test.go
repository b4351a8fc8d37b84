package ctl

import (
	"testing"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// TestGuardLineCountsDevicesInTheRightNumber: `ironlink policy guard`
// says "at most 1 device", not "1 devices", for the site and per label.
func TestGuardLineCountsDevicesInTheRightNumber(t *testing.T) {
	g := &ironlinkv1.PolicyGuard{MaxDevices: 1, MaxPercent: 10, PerLabel: []*ironlinkv1.PolicyLabelGuard{
		{Label: "rack", MaxDevices: 1}, {Label: "row", MaxDevices: 2, MaxPercent: 50}}}
	got := guardLine(g)
	want := "at most 1 device and 10% of the site per ; per rack at most 1 device; per row at most 2 devices and 50% of it"
	if got != want {
		t.Fatalf("guardLine = %q, want %q", got, want)
	}
}

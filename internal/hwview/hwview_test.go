package hwview_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/hwview"
)

// State names each inventory state; Facts are empty without a usable
// inventory and kept for a stale one, GPUs counted by model.
func TestStateAndFacts(t *testing.T) {
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	read := &ironlinkv1.HardwareState{InventoryAvailable: true, InventoryStatus: "Read", ReadAt: timestamppb.New(at),
		InspectionFinishedAt: timestamppb.New(at.Add(-time.Minute)), MemoryMib: 1536,
		PciDevices: []*ironlinkv1.HardwarePCIDevice{{VendorId: "10de", ProductId: "2330", Class: "030200", Count: 3},
			{VendorId: "10de", ProductId: "2331", Class: "030000", Count: 5}, {VendorId: "15b3", ProductId: "1021", Class: "020700", Count: 1}}}
	stale := &ironlinkv1.HardwareState{Stale: true, StaleSince: timestamppb.New(at), InventoryStatus: "NotInspected", MemoryMib: 1024}
	for _, c := range []struct {
		h     *ironlinkv1.HardwareState
		state string
		facts int
	}{
		{nil, "never read", 0},
		{&ironlinkv1.HardwareState{InventoryStatus: "Unsupported"}, "no inventory: Unsupported", 0},
		{&ironlinkv1.HardwareState{}, "no inventory: (unknown)", 0},
		{stale, "stale since 2026-05-01T10:00:00Z (Ironic answers NotInspected; the last facts are kept)", 1},
		{read, "read 2026-05-01T10:00:00Z (inspection finished 2026-05-01T09:59:00Z)", 2},
	} {
		if got := hwview.State(c.h); got != c.state {
			t.Errorf("State = %q, want %q", got, c.state)
		}
		if got := hwview.Facts(c.h); len(got) != c.facts {
			t.Errorf("%q: facts %v, want %d", c.state, got, c.facts)
		}
	}
	f := hwview.Facts(read)
	if f[0] != (hwview.Fact{Label: "Memory", Value: "2 GiB"}) || f[1] != (hwview.Fact{Label: "GPUs", Value: "5× 10de:2331, 3× 10de:2330"}) {
		t.Errorf("facts %v", f)
	}
}

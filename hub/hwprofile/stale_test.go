package hwprofile_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/hwprofile"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// A read that finds the inventory gone keeps the last facts at the hub,
// marked stale since that read; a later read with an inventory clears it.
// Each read is in the history.
func TestInventoryGoneKeepsFactsStale(t *testing.T) {
	st, _ := storetest.New(t, testlog.New(t))
	site := storetest.NewSite(t, st, "site-a", 1, nil)
	ctx := context.Background()
	id := site.IDs[0]
	stored := func() *ironlinkv1.HardwareState {
		t.Helper()
		b, err := st.DeviceHardwareJSON(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		h, err := hwprofile.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	sendHardware(t, site, 0, machine(8, 2<<20, "1.5.0"))
	gone := time.Now().Add(time.Second).UTC()
	sendHardware(t, site, 0, &ironlinkv1.HardwareState{InventoryStatus: "NotInspected", ReadAt: timestamppb.New(gone)})
	h := stored()
	if !h.GetStale() || h.GetInventoryAvailable() || h.GetInventoryStatus() != "NotInspected" || !h.GetStaleSince().AsTime().Equal(gone) ||
		hwprofile.Facts(h)["gpu_count"] != "8" {
		t.Fatalf("after the inventory went: %v", h)
	}
	sendHardware(t, site, 0, &ironlinkv1.HardwareState{InventoryStatus: "NotInspected", ReadAt: timestamppb.New(gone.Add(time.Second))})
	if h := stored(); !h.GetStaleSince().AsTime().Equal(gone) {
		t.Errorf("stale_since moved to %v, want %v", h.GetStaleSince().AsTime(), gone)
	}
	back := machine(7, 2<<20, "1.5.0")
	back.ReadAt = timestamppb.New(gone.Add(2 * time.Second))
	sendHardware(t, site, 0, back)
	if h := stored(); h.GetStale() || hwprofile.Facts(h)["gpu_count"] != "7" {
		t.Errorf("after a new inventory: %v", h)
	}
	hist, err := st.HardwareHistory(ctx, id, 10)
	if err != nil || len(hist) != 4 {
		t.Fatalf("history: %d entries, %v", len(hist), err)
	}
}

package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/storetest"
)

// TestReportHealthNodeByLabel: a node name that names no device maps
// through the site's hostname and address labels (satellite-mapped or
// from the labels file), its first DNS label too; a device name still
// wins; two devices carrying the address are refused, both named.
func TestReportHealthNodeByLabel(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	a := storetest.NewSite(t, s, "site-a", 3, nil)
	b := storetest.NewSite(t, s, "site-b", 1, nil)
	now := time.Now().UTC().Truncate(time.Microsecond)
	a.Send([]store.DeviceUpdate{{DeviceID: a.IDs[0], Conditions: storetest.Healthy(now), ObservedTime: now,
		Facts: &store.Facts{Name: "site-a-000", Labels: map[string]string{"address": "10.0.15.233", "hostname": "gpu-node-07"}}}})
	if err := s.ReplaceFileLabels(ctx, []store.FileLabelEntry{
		{DeviceID: a.IDs[1], Labels: map[string]string{"address": "10.0.15.234"}},
		{DeviceID: b.IDs[0], Labels: map[string]string{"address": "10.0.15.235"}},
	}); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct{ node, want string }{
		{"10.0.15.233", a.IDs[0]}, {"gpu-node-07.dc1.example", a.IDs[0]}, {"10.0.15.234", a.IDs[1]}, {"site-a-002", a.IDs[2]},
	} {
		ev := xid("", "l"+string(rune('a'+i)), now, false, true, "79")
		ev.NodeName = tc.node
		if res := report(t, s, "site-a", ev); res[0].DeviceID != tc.want {
			t.Errorf("node %s mapped to %s, want %s", tc.node, res[0].DeviceID, tc.want)
		}
	}
	other := xid("", "o1", now, false, true)
	other.NodeName = "10.0.15.235" // a device of site-b: not a candidate at site-a
	if _, err := s.ReportHealth(ctx, "site-a", []store.HealthEvent{other}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another site's address: %v, want NotFound", err)
	}
	if err := s.ReplaceFileLabels(ctx, []store.FileLabelEntry{{Site: "site-a", NameLike: "site-a-00%", Labels: map[string]string{"address": "10.0.15.1"}}}); err != nil {
		t.Fatal(err)
	}
	amb := xid("", "a1", now, false, true)
	amb.NodeName = "10.0.15.1"
	_, err := s.ReportHealth(ctx, "site-a", []store.HealthEvent{amb})
	if !errors.Is(err, store.ErrAmbiguous) || !containsAll(err.Error(), a.IDs...) {
		t.Errorf("address on three devices: %v, want ErrAmbiguous naming all three", err)
	}
}

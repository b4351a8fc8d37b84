package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/pgtest"
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

// TestReportHealthNodeNameIgnoresCase: host names compare without ASCII
// case (RFC 4343): a node name maps to the device named, or labelled,
// in another case, its first DNS label too; two devices whose names
// differ only in case are ambiguous, both named; a device_name (ironlink's
// own name of the device) still matches exactly.
func TestReportHealthNodeNameIgnoresCase(t *testing.T) {
	s, url := newStore(t)
	ctx := context.Background()
	a := storetest.NewSite(t, s, "site-a", 3, nil)
	now := time.Now().UTC().Truncate(time.Microsecond)
	a.Send([]store.DeviceUpdate{
		{DeviceID: a.IDs[0], Conditions: storetest.Healthy(now), ObservedTime: now, Facts: &store.Facts{Name: "GPU-Node-07"}},
		{DeviceID: a.IDs[1], Conditions: storetest.Healthy(now), ObservedTime: now,
			Facts: &store.Facts{Name: "site-a-001", Labels: map[string]string{"hostname": "Rack12-GPU-3", "address": "fe80--1"}}},
	})
	for i, tc := range []struct{ node, want string }{
		{"gpu-node-07", a.IDs[0]}, {"GPU-NODE-07.DC1.Example", a.IDs[0]}, {"rack12-gpu-3.dc1.example", a.IDs[1]},
		{"SITE-A-002", a.IDs[2]}, {"FE80--1", a.IDs[1]},
	} {
		ev := xid("", "c"+string(rune('a'+i)), now, false, true, "79")
		ev.NodeName = tc.node
		if res := report(t, s, "site-a", ev); res[0].DeviceID != tc.want {
			t.Errorf("node %s mapped to %s, want %s", tc.node, res[0].DeviceID, tc.want)
		}
	}
	byName := xid("", "dn", now, false, true)
	byName.DeviceName = "gpu-node-07" // ironlink's name: exact
	if _, err := s.ReportHealth(ctx, "site-a", []store.HealthEvent{byName}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("device_name in another case: %v, want NotFound", err)
	}
	pgtest.MustExec(t, url, `UPDATE devices SET name = 'twin' WHERE id = $1`, a.IDs[1])
	pgtest.MustExec(t, url, `UPDATE devices SET name = 'TWIN' WHERE id = $1`, a.IDs[2])
	amb := xid("", "tw", now, false, true)
	amb.NodeName = "Twin"
	_, err := s.ReportHealth(ctx, "site-a", []store.HealthEvent{amb})
	if !errors.Is(err, store.ErrAmbiguous) || !containsAll(err.Error(), a.IDs[1], a.IDs[2]) {
		t.Errorf("names differing only in case: %v, want ErrAmbiguous naming both", err)
	}
}

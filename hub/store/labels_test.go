package store_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// TestLabels: a device's labels are the satellite's with the labels file
// over them (by id, or by site and name pattern, later entries winning);
// ListDevices and the bulk selector select on them; a reload replaces the
// file's labels whole.
func TestLabels(t *testing.T) {
	ctx := context.Background()
	st, _ := storetest.New(t, testlog.New(t))
	s := storetest.NewSite(t, st, "s", 4, nil)
	at := time.Now()
	var ups []store.DeviceUpdate
	for i, id := range s.IDs {
		rack := "r1"
		if i >= 2 {
			rack = "r2"
		}
		ups = append(ups, store.DeviceUpdate{DeviceID: id, Conditions: storetest.Healthy(at), ObservedTime: at,
			Facts: &store.Facts{Name: s.Name + "-00" + string(rune('0'+i)), Labels: map[string]string{"rack": rack, "row": "a"}}})
	}
	s.Send(ups)
	err := st.ReplaceFileLabels(ctx, []store.FileLabelEntry{
		{Site: "s", NameLike: "s-00%", Labels: map[string]string{"room": "hall-1", "switch": "sw1"}},
		{DeviceID: s.IDs[3], Labels: map[string]string{"switch": "sw2", "rack": "r9"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := st.GetDevice(ctx, s.IDs[3])
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"rack": "r9", "row": "a", "room": "hall-1", "switch": "sw2"}
	if !maps.Equal(d.Labels, want) || d.Facts.Labels["rack"] != "r2" {
		t.Fatalf("labels %v (satellite %v), want %v (satellite rack r2)", d.Labels, d.Facts.Labels, want)
	}
	count := func(sel map[string]string) int {
		t.Helper()
		devs, _, err := st.ListDevices(ctx, store.DeviceFilter{Labels: sel, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		_, n, err := st.MatchDevices(ctx, store.DeviceSelector{Labels: sel}, 10)
		if err != nil {
			t.Fatal(err)
		}
		if n != len(devs) {
			t.Fatalf("selector %v: ListDevices %d devices, MatchDevices %d", sel, len(devs), n)
		}
		return n
	}
	for _, tc := range []struct {
		sel  map[string]string
		want int
	}{
		{map[string]string{"rack": "r1"}, 2}, {map[string]string{"rack": "r2"}, 1}, {map[string]string{"switch": "sw1"}, 3},
		{map[string]string{"switch": "sw1", "rack": "r1"}, 2}, {map[string]string{"room": "hall-2"}, 0}, {nil, 4},
	} {
		if got := count(tc.sel); got != tc.want {
			t.Errorf("selector %v: %d devices, want %d", tc.sel, got, tc.want)
		}
	}
	if err := st.ReplaceFileLabels(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := count(map[string]string{"switch": "sw1"}); got != 0 {
		t.Errorf("after the file's labels were removed: %d devices with switch=sw1, want 0", got)
	}
	if got := count(map[string]string{"rack": "r2"}); got != 2 {
		t.Errorf("after the file's labels were removed: %d devices with rack=r2, want 2", got)
	}
}

// TestLabelsLimitAppliesToTheMergedSet: the satellite's 30 labels and the
// labels file's 5 more (one of them overriding a satellite key) merge to
// 34 keys; the device carries 32: all of the file's, then the satellite's
// in key byte order, so the satellite's two highest keys are dropped, and
// a selector on a dropped label no longer matches. The device is counted
// (and named) as over the limit; a device under it is not.
func TestLabelsLimitAppliesToTheMergedSet(t *testing.T) {
	ctx := context.Background()
	st, _ := storetest.New(t, testlog.New(t))
	s := storetest.NewSite(t, st, "s", 2, nil)
	at := time.Now()
	sat := map[string]string{}
	for i := range 30 {
		sat[fmt.Sprintf("k%02d", i)] = "sat"
	}
	s.Send([]store.DeviceUpdate{
		{DeviceID: s.IDs[0], Conditions: storetest.Healthy(at), ObservedTime: at, Facts: &store.Facts{Name: "big", Labels: sat}},
		{DeviceID: s.IDs[1], Conditions: storetest.Healthy(at), ObservedTime: at, Facts: &store.Facts{Name: "small", Labels: map[string]string{"k00": "sat"}}},
	})
	if n, err := st.CountDevicesOverLabelLimit(ctx); err != nil || n.Devices != 0 {
		t.Fatalf("without a labels file: %+v, %v; want 0 devices over the limit", n, err)
	}
	file := map[string]string{"zz-a": "f", "zz-b": "f", "zz-c": "f", "zz-d": "f", "k05": "file"}
	if err := st.ReplaceFileLabels(ctx, []store.FileLabelEntry{{Site: "s", NameLike: "%", Labels: file}}); err != nil {
		t.Fatal(err)
	}
	d, err := st.GetDevice(ctx, s.IDs[0])
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := range 28 { // k00..k27: the satellite's lowest keys
		want[fmt.Sprintf("k%02d", i)] = "sat"
	}
	maps.Copy(want, file)
	if !maps.Equal(d.Labels, want) {
		t.Fatalf("merged labels (%d) %v, want (%d) %v", len(d.Labels), d.Labels, len(want), want)
	}
	devs, _, err := st.ListDevices(ctx, store.DeviceFilter{Labels: map[string]string{"k29": "sat"}, Limit: 10})
	if err != nil || len(devs) != 0 {
		t.Fatalf("selector on the dropped label k29: %d devices, %v; want none", len(devs), err)
	}
	small, err := st.GetDevice(ctx, s.IDs[1])
	if err != nil || len(small.Labels) != 6 {
		t.Fatalf("the device under the limit carries %v, %v; want its 6 labels", small.Labels, err)
	}
	n, err := st.CountDevicesOverLabelLimit(ctx)
	if err != nil || n.Devices != 1 || len(n.Sample) != 1 || !strings.Contains(n.Sample[0], "s/big ("+s.IDs[0]+"): 34 labels") {
		t.Fatalf("over the limit: %+v, %v; want the one device s/big with 34 labels", n, err)
	}
}

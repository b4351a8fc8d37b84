package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/storetest"
)

// h100 is a seed-inventory H100 server: gpus GPUs, BIOS firmware bios,
// Hyper-Threading ht.
func h100(gpus uint32, bios, ht string) *ironlinkv1.HardwareState {
	return &ironlinkv1.HardwareState{CpuModel: "Intel(R) Xeon(R) Platinum 8480+", CpuCount: 224, MemoryMib: 2 << 20,
		PciDevices:   []*ironlinkv1.HardwarePCIDevice{{VendorId: "10de", ProductId: "2330", Class: "030200", Count: gpus}},
		BiosSettings: map[string]string{"HyperThreading": ht}, BiosAvailable: true,
		FirmwareVersions: map[string]string{"bios": bios}, InventoryAvailable: true, InventoryStatus: "Read",
		ReadAt: timestamppb.Now()}
}

// The drift page in Chromium: a gpu-h100 group of six devices, four
// alike, one with 7 GPUs and one on BIOS 1.4.2 with Hyper-Threading on,
// shows "4 match", each outlier group with its device and its selector;
// an outlier row's "inspect these…" opens the start form with its selector
// and starts an INSPECT of that group's device only; a site filter without
// devices says so.
func TestDriftPageInChromium(t *testing.T) {
	newTab := browser(t)
	e := startHub(t)
	site := storetest.NewSite(t, e.st, "alpha", 6, nil)
	var ups []store.DeviceUpdate
	for i, id := range site.IDs {
		h := h100(8, "1.5.0", "Disabled")
		switch i {
		case 4:
			h = h100(7, "1.5.0", "Disabled")
		case 5:
			h = h100(8, "1.4.2", "Enabled")
		}
		b, err := protojson.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		ups = append(ups, store.DeviceUpdate{DeviceID: id, ObservedTime: now,
			Facts:    &store.Facts{Name: fmt.Sprintf("gpu-%02d", i), ResourceClass: "gpu-h100", ProvisionState: "manageable"},
			Hardware: &store.Hardware{JSON: b, ReadAt: now}})
	}
	site.Send(ups)

	tab := newTab("ops-read")
	run(t, tab, "open the drift page", chromedp.Navigate(e.webURL+"/drift?resource_class=gpu-h100"),
		chromedp.WaitVisible(chromedp.CSS(".drift-group")))
	var summary string
	eval(t, tab, `document.querySelector('.drift-summary').textContent`, &summary)
	for _, want := range []string{"gpu-h100: 4 match", "1 have 7 GPUs instead of 8", "1 run BIOS firmware 1.4.2 instead of 1.5.0",
		"1 have HyperThreading Enabled instead of Disabled"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary %q lacks %q", summary, want)
		}
	}
	var rows []string
	eval(t, tab, `[...document.querySelectorAll('tr.drift-outlier')].map(r => r.dataset.fact + '=' + r.dataset.actual + ' ' + r.querySelector('a').textContent + ' ' + r.querySelector('code.selector').textContent)`, &rows)
	want := map[string]bool{
		"gpu_count=7 gpu-04 site=alpha,class=gpu-h100,hw.gpu_count=7":                                 true,
		"firmware.bios=1.4.2 gpu-05 site=alpha,class=gpu-h100,hw.firmware.bios=1.4.2":                 true,
		"bios.HyperThreading=Enabled gpu-05 site=alpha,class=gpu-h100,hw.bios.HyperThreading=Enabled": true,
	}
	if len(rows) != len(want) {
		t.Errorf("outlier rows %q, want %d", rows, len(want))
	}
	for _, r := range rows {
		if !want[r] {
			t.Errorf("unexpected outlier row %q", r)
		}
	}
	shoot(t, tab, "drift.png")

	// Each outlier row links to the operations page's start form with its
	// selector filled in; starting it inspects the group's devices.
	if _, err := e.st.OpenLink(context.Background(), store.LinkHello{Site: "alpha", BootID: uuid.NewString(), Replica: "elsewhere",
		Capabilities: []string{operations.Capability}}); err != nil {
		t.Fatal(err)
	}
	writer := newTab("ops-write")
	run(t, writer, "open the drift page to act", chromedp.Navigate(e.webURL+"/drift?resource_class=gpu-h100"),
		chromedp.WaitVisible(chromedp.CSS(".drift-group")))
	clickNav(t, writer, "inspect the 7-GPU outliers", `tr.drift-outlier[data-fact=gpu_count] a.drift-inspect`, "#op-start-form")
	var form []string
	eval(t, writer, `[document.querySelector('#op-kind').value, document.querySelector('#op-selector').value, String(document.querySelector('#op-start').open)]`, &form)
	if strings.Join(form, " ") != "INSPECT site=alpha,class=gpu-h100,hw.gpu_count=7 true" {
		t.Fatalf("start form (kind, selector, open) = %q", form)
	}
	run(t, writer, "give a reason", chromedp.SendKeys(chromedp.CSS("#op-reason"), "7 GPUs: inspect again"))
	shoot(t, writer, "drift-inspect-form.png")
	clickNav(t, writer, "start", "#op-start-btn", "#op-facts")
	ops, err := e.st.RecentOperations(context.Background(), site.IDs[4], 5)
	if err != nil || len(ops) != 1 || ops[0].Kind != "INSPECT" || ops[0].Reason != "7 GPUs: inspect again" {
		t.Fatalf("operations of gpu-04: %+v, %v; want one INSPECT", ops, err)
	}
	for _, id := range site.IDs[:4] {
		if o, _ := e.st.RecentOperations(context.Background(), id, 5); len(o) != 0 {
			t.Errorf("a matching device got operations %+v", o)
		}
	}

	run(t, tab, "filter by a resource class no device has", chromedp.SetValue(chromedp.CSS(`#drift-filters input[name=resource_class]`), "gpu-a100"),
		chromedp.Click(chromedp.CSS(`#drift-filters button`)), chromedp.WaitVisible(chromedp.CSS("#drift-empty")))
	shoot(t, tab, "drift-empty.png")

	// An unknown site is named as such (not shown as a site without
	// drift), with the filters kept so it can be corrected.
	run(t, tab, "filter by an unknown site", chromedp.SetValue(chromedp.CSS(`#drift-filters input[name=site]`), "beta"),
		chromedp.Click(chromedp.CSS(`#drift-filters button`)), chromedp.WaitVisible(chromedp.CSS("#drift-error")))
	var msg string
	eval(t, tab, `document.querySelector('#drift-error').textContent`, &msg)
	if !strings.Contains(msg, "beta") {
		t.Errorf("unknown-site message %q does not name the site", msg)
	}
	shoot(t, tab, "drift-unknown-site.png")
}

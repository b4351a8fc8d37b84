package web

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/storetest"
)

// The device page's hardware section: the inventory's state and key
// facts of a read inventory; "no inventory: NotInspected" without one;
// "stale since …" with the last facts kept once the inventory went.
func TestDevicePageHardwareSection(t *testing.T) {
	e := newEnv(t)
	h := consoleServer(t, e)
	site := storetest.NewSite(t, e.st, "gamma", 2, nil)
	send := func(i int, hw *ironlinkv1.HardwareState) {
		t.Helper()
		b, err := protojson.Marshal(hw)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		site.Send([]store.DeviceUpdate{{DeviceID: site.IDs[i], ObservedTime: now, Facts: &store.Facts{Name: "g" + string(rune('0'+i)), ResourceClass: "gpu-h100"},
			Hardware: &store.Hardware{JSON: b, ReadAt: hw.GetReadAt().AsTime()}}})
	}
	read := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	send(0, &ironlinkv1.HardwareState{CpuModel: "Xeon 8480", CpuCount: 224, CpuArchitecture: "x86_64", MemoryMib: 2 << 20,
		PciDevices:   []*ironlinkv1.HardwarePCIDevice{{VendorId: "10de", ProductId: "2330", Class: "030200", Count: 8}, {VendorId: "15b3", ProductId: "1021", Class: "020700", Count: 1}},
		Disks:        []*ironlinkv1.HardwareDisk{{SizeBytes: 3840755982336}, {SizeBytes: 3840755982336}},
		Nics:         []*ironlinkv1.HardwareNIC{{SpeedMbps: 200000}},
		BiosSettings: map[string]string{"HyperThreading": "Disabled"}, BiosAvailable: true,
		FirmwareVersions: map[string]string{"bios": "1.5.0"}, InventoryAvailable: true, InventoryStatus: "Read", ReadAt: timestamppb.New(read)})
	send(1, &ironlinkv1.HardwareState{InventoryStatus: "NotInspected", ReadAt: timestamppb.New(read)})

	section := func(i int) string {
		t.Helper()
		w := do(t, h, "GET", "/devices/"+site.IDs[i], "ops-read", "", nil, nil)
		body := w.Body.String()
		start, end := strings.Index(body, `<section id="hardware">`), strings.Index(body, `<section id="validation-runs">`)
		if w.Code != http.StatusOK || start < 0 || end < start {
			t.Fatalf("device page %d: %d, no hardware section:\n%.2000s", i, w.Code, body)
		}
		return body[start:end]
	}
	got := section(0)
	for _, want := range []string{`<p id="hardware-state">read 2026-05-01T10:00:00Z</p>`, "<th>CPU</th><td>224× Xeon 8480 x86_64</td>",
		"<th>Memory</th><td>2048 GiB</td>", "<th>GPUs</th><td>8× 10de:2330</td>", "<th>Disks</th><td>2× 3840 GB SSD</td>",
		"<th>NICs</th><td>1× 200000 Mbit/s</td>", "<th>Firmware</th><td>bios 1.5.0</td>", "<th>BIOS settings</th><td>HyperThreading=Disabled</td>"} {
		if !strings.Contains(got, want) {
			t.Errorf("read inventory: section lacks %s:\n%s", want, got)
		}
	}
	if got := section(1); !strings.Contains(got, `<p id="hardware-state">no inventory: NotInspected</p>`) || strings.Contains(got, "hardware-facts") {
		t.Errorf("no inventory: section\n%s", got)
	}
	gone := read.Add(time.Hour)
	send(0, &ironlinkv1.HardwareState{InventoryStatus: "NotInspected", BiosAvailable: true, ReadAt: timestamppb.New(gone)})
	if got := section(0); !strings.Contains(got, "stale since 2026-05-01T11:00:00Z (Ironic answers NotInspected; the last facts are kept)") ||
		!strings.Contains(got, "<th>GPUs</th><td>8× 10de:2330</td>") {
		t.Errorf("stale inventory: section\n%s", got)
	}
}

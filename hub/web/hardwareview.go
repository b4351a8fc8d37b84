package web

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// The validation runs page and a device's hardware history
// (docs/reference/web.md "Validation runs", "Hardware history"), through
// HardwareService's own handlers, as `ironlink validate runs` and
// `ironlink hardware history` show them.

type validationData struct {
	Filter url.Values
	Runs   []*ironlinkv1.ValidationRun
	// Asked: a site or a device was given (the API needs one of them).
	Asked bool
}

// validationRuns handles GET /validation: ?site or ?device (name,
// SITE/NAME or id), the newest 100 runs with their check results.
func (s *Server) validationRuns(w http.ResponseWriter, r *http.Request, id Identity) {
	q := r.URL.Query()
	d := validationData{Filter: q, Asked: q.Get("site") != "" || q.Get("device") != ""}
	if d.Asked {
		resp, err := s.fleet.Hardware().ListValidationRuns(apiContext(r.Context(), id),
			&ironlinkv1.ListValidationRunsRequest{Site: q.Get("site"), Device: q.Get("device"), PageSize: 100})
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		d.Runs = resp.GetRuns()
	}
	s.render(w, r, http.StatusOK, "validation", "Validation runs", d)
}

type hardwareData struct {
	Device  string
	ID      string
	Entries []hardwareEntry
}

// hardwareEntry is one stored hardware state in the words of the page.
type hardwareEntry struct {
	E *ironlinkv1.HardwareHistoryEntry
	// Summary: CPU, memory, disks, NICs, GPUs (PCI display/3D devices).
	Summary string
	// Facts are the BIOS settings and firmware versions, sorted.
	Facts []string
}

// hardwareHistory handles GET /hardware?device=REF: the device's hardware
// as each read stored it, newest first, with what changed.
func (s *Server) hardwareHistory(w http.ResponseWriter, r *http.Request, id Identity) {
	ref := r.URL.Query().Get("device")
	d := hardwareData{Device: ref}
	if ref != "" {
		resp, err := s.fleet.Hardware().ListHardwareHistory(apiContext(r.Context(), id), &ironlinkv1.ListHardwareHistoryRequest{Device: ref, PageSize: 50})
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		d.ID = resp.GetDeviceId()
		for _, e := range resp.GetEntries() {
			d.Entries = append(d.Entries, newHardwareEntry(e))
		}
	}
	s.render(w, r, http.StatusOK, "hardware", "Hardware history", d)
}

func newHardwareEntry(e *ironlinkv1.HardwareHistoryEntry) hardwareEntry {
	h := e.GetHardware()
	var parts []string
	if h.GetCpuCount() > 0 || h.GetCpuModel() != "" {
		parts = append(parts, fmt.Sprintf("%d× %s %s", h.GetCpuCount(), h.GetCpuModel(), h.GetCpuArchitecture()))
	}
	if h.GetMemoryMib() > 0 {
		parts = append(parts, fmt.Sprintf("%d GiB memory", h.GetMemoryMib()/1024))
	}
	if n := len(h.GetDisks()); n > 0 {
		parts = append(parts, fmt.Sprintf("%d disks", n))
	}
	if n := len(h.GetNics()); n > 0 {
		parts = append(parts, fmt.Sprintf("%d NICs", n))
	}
	for _, p := range h.GetPciDevices() {
		parts = append(parts, fmt.Sprintf("%d× PCI %s:%s (class %s)", p.GetCount(), p.GetVendorId(), p.GetProductId(), p.GetClass()))
	}
	out := hardwareEntry{E: e, Summary: strings.Join(parts, ", ")}
	for k, v := range h.GetBiosSettings() {
		out.Facts = append(out.Facts, "bios."+k+" = "+v)
	}
	for k, v := range h.GetFirmwareVersions() {
		out.Facts = append(out.Facts, "firmware."+k+" = "+v)
	}
	sort.Strings(out.Facts)
	return out
}

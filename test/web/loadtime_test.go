package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	hubstatus "github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/web"
	"github.com/ironlink/ironlink/hub/web/webtest"
)

// TestPageLoadTimesAt10000Devices measures (and logs; it asserts no
// timing) how long the fleet view's pages take with 10,000 devices over
// four sites: the server's answer (Go HTTP client, full page) and the
// browser's navigation until the load event (Chromium's Navigation Timing),
// median of five. The figures also go to screenshots/page-load-10000.txt.
func TestPageLoadTimesAt10000Devices(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 10,000 devices; skipped with -short")
	}
	newTab := browser(t)
	e := startHub(t)
	ctx := context.Background()
	statuses := []hubstatus.Status{hubstatus.Available, hubstatus.InService, hubstatus.InService, hubstatus.Allocated,
		hubstatus.Faulted, hubstatus.Maintenance, hubstatus.Held, hubstatus.Validating, hubstatus.Onboarding, hubstatus.Available}
	const sites, perSite = 4, 2500
	var someID, lastPageCursor string
	seedStart := time.Now()
	for s := range sites {
		devs := make([]webtest.Device, perSite)
		for i := range devs {
			devs[i] = webtest.Device{Name: fmt.Sprintf("node-%d-%04d", s, i), Status: statuses[i%len(statuses)]}
		}
		ids, err := webtest.SeedSite(ctx, e.st, fmt.Sprintf("site-%d", s), devs)
		if err != nil {
			t.Fatal(err)
		}
		someID = ids[perSite/2]
	}
	if err := e.st.Pool().QueryRow(ctx, `SELECT id::text FROM devices ORDER BY id DESC OFFSET 50 LIMIT 1`).Scan(&lastPageCursor); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Pool().Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded %d devices in %s", sites*perSite, time.Since(seedStart).Round(time.Millisecond))

	pages := []struct{ name, path, expect string }{
		{"overview (site × status matrix)", "/", `<a href="/devices">10000</a>`},
		{"device list, first page of 100", "/devices", "<strong>10000</strong>"},
		{"device list, FAULTED of all sites", "/devices?status=FAULTED", "<strong>1000</strong>"},
		{"device list, one site AVAILABLE, 1000 per page", "/devices?site=site-2&status=AVAILABLE&size=1000", "<strong>500</strong>"},
		{"device list, name search", "/devices?q=node-3-12", "<strong>100</strong>"},
		{"device list, last page (keyset)", "/devices?after=" + lastPageCursor, "<strong>10000</strong>"},
		{"device page", "/devices/" + someID, `id="timeline"`},
	}
	client := &http.Client{Timeout: 30 * time.Second}
	get := func(path string) (time.Duration, string) {
		req, _ := http.NewRequest("GET", e.webURL+path, nil)
		req.Header.Set(web.DefaultUserHeader, "ops-read")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return d, string(b)
	}
	tab := newTab("ops-read")
	median := func(ds []time.Duration) time.Duration { slices.Sort(ds); return ds[len(ds)/2] }
	var report strings.Builder
	fmt.Fprintf(&report, "fleet view page load times, %d devices over %d sites, median of 5 (%s)\n", sites*perSite, sites, time.Now().UTC().Format(time.DateTime))
	fmt.Fprintf(&report, "%-50s %10s %10s %9s\n", "page", "server", "browser", "bytes")
	for _, p := range pages {
		var server, browserT []time.Duration
		var size int
		for range 5 {
			d, body := get(p.path)
			if !strings.Contains(body, p.expect) {
				t.Fatalf("%s: page lacks %q", p.name, p.expect)
			}
			server, size = append(server, d), len(body)
			run(t, tab, "navigate "+p.path, chromedp.Navigate(e.webURL+p.path))
			var ms float64
			eval(t, tab, `performance.getEntriesByType('navigation')[0].loadEventEnd`, &ms)
			browserT = append(browserT, time.Duration(ms*float64(time.Millisecond)))
		}
		fmt.Fprintf(&report, "%-50s %10s %10s %9d\n", p.name, median(server).Round(100*time.Microsecond), median(browserT).Round(100*time.Microsecond), size)
	}
	run(t, tab, "overview", chromedp.Navigate(e.webURL+"/"))
	shoot(t, tab, "overview-10000.png")
	t.Log("\n" + report.String())
	path := filepath.Join(screenshotDir(t), "page-load-10000.txt")
	if err := os.WriteFile(path, []byte(report.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("figures: %s", path)
}

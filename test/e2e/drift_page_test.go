package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

// TestDriftPageRealProcesses loads the drift page in Chromium from a hub
// process whose facts come from a satellite process polling the
// simulator: six gpu-h100 machines, one with 7 GPUs and one on BIOS 1.4.2
// with Hyper-Threading on. The page shows "4 match", each outlier group
// with its device and selector, and the selector it shows selects exactly
// that group's device for a bulk action.
func TestDriftPageRealProcesses(t *testing.T) {
	chromium := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			chromium = p
			break
		}
	}
	if chromium == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed, and CI=true requires the browser tests: apt-get install -y chromium")
		}
		t.Skip("chromium is not installed: apt-get install -y chromium")
	}
	const site = "driftweb"
	db := pgtest.NewDatabase(t)
	id := newIdentity(t, []string{site}, map[string][]string{"ops-admin": {auth.ScopeOperationsRead}})
	profiles := filepath.Join(t.TempDir(), "profiles.yaml")
	if err := os.WriteFile(profiles, []byte(strings.Replace(e2eProfiles, "fault: true", "fault: false", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	webAddr := harness.FreeAddr(t)
	hubAddr, _ := startHub(t, db, id, "--hardware-profiles-file", profiles, "--web-addr", webAddr, "--web-auth", "proxy",
		"--web-trusted-proxies", "127.0.0.1")
	sim, _ := startSimSite(t, id, hubAddr, site, 0)
	names := map[string]string{}
	for i := range 6 {
		hw := openstacksim.DefaultHardware
		switch i {
		case 4:
			hw.GPUs = 7
		case 5:
			hw.BIOSVersion, hw.HT = "1.4.2", true
		}
		n := sim.AddNode(openstacksim.Node{Name: fmt.Sprintf("gpu-%02d", i), ProvisionState: "available", PowerState: "power off",
			ResourceClass: "gpu-h100", Traits: []string{readyTrait}, InspectionFinishedAt: time.Now().UTC().Add(-time.Hour).Truncate(time.Second)})
		if err := sim.UpdateNode(n.UUID, func(x *openstacksim.Node) { openstacksim.SetHardware(x, hw) }); err != nil {
			t.Fatal(err)
		}
		names[n.Name] = n.UUID
	}
	admin := id.dialAs(t, hubAddr, "ops-admin")
	hw, bulk := ironlinkv1.NewHardwareServiceClient(admin), ironlinkv1.NewBulkServiceClient(admin)
	harness.Eventually(t, time.Minute, func() error {
		d, err := hw.GetFleetDrift(context.Background(), &ironlinkv1.GetFleetDriftRequest{Site: site, ResourceClass: "gpu-h100"})
		if err != nil || len(d.GetGroups()) != 1 || d.GetGroups()[0].GetMatching() != 4 {
			return fmt.Errorf("drift not in yet: %v %v", d, err)
		}
		return nil
	})

	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-dev-shm-usage", true),
		// The hub serves the fleet view with its gRPC certificate (the
		// test's own CA).
		chromedp.Flag("ignore-certificate-errors", true))
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(actx)
	defer cancelTab()
	ctx, cancel := context.WithTimeout(tab, 90*time.Second)
	defer cancel()
	// The hub believes the user header from 127.0.0.1 (--web-auth proxy).
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"X-Forwarded-User": "ops-admin"}}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("https://"+webAddr+"/drift?site="+site+"&resource_class=gpu-h100"),
		chromedp.WaitVisible(chromedp.CSS(".drift-group"))); err != nil {
		t.Fatalf("drift page in Chromium: %v", err)
	}
	summary, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('.drift-summary').textContent`))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('tr.drift-outlier')].map(r => r.dataset.fact + '=' + r.dataset.actual + ' ' + r.querySelector('a').textContent + ' ' + r.querySelector('code.selector').textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gpu-h100: 4 match", "1 have 7 GPUs instead of 8", "1 run BIOS firmware 1.4.2 instead of 1.5.0",
		"1 have HyperThreading Enabled instead of Disabled"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary %q lacks %q", summary, want)
		}
	}
	sel := "site=" + site + ",class=gpu-h100,hw.gpu_count=7"
	for _, want := range []string{"gpu_count=7 gpu-04 " + sel, "firmware.bios=1.4.2 gpu-05 site=" + site + ",class=gpu-h100,hw.firmware.bios=1.4.2",
		"bios.HyperThreading=Enabled gpu-05 site=" + site + ",class=gpu-h100,hw.bios.HyperThreading=Enabled"} {
		if !slices.Contains(rows, want) {
			t.Errorf("outlier rows %q lack %q", rows, want)
		}
	}
	p, err := bulk.PreviewBulkImpairment(context.Background(), &ironlinkv1.PreviewBulkImpairmentRequest{
		Selector: &ironlinkv1.DeviceSelector{Site: site, ResourceClass: "gpu-h100", HardwareFacts: map[string]string{"gpu_count": "7"}}})
	if err != nil || p.GetCount() != 1 || p.GetDevices()[0].GetDeviceId() != names["gpu-04"] {
		t.Fatalf("the page's selector %s previews %v %v, want gpu-04 only", sel, p, err)
	}
}

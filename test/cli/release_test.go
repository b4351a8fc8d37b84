package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/ctl"
	"github.com/ironlink/ironlink/internal/healthsim"
	"github.com/ironlink/ironlink/internal/tlsutil"
	"github.com/ironlink/ironlink/test/harness"
)

// xidPolicy quarantines a GPU that fell off the bus (XID 79).
const xidPolicy = `
policy:
  default:
    enabled: true
    guard: {maxDevices: 5, maxPercent: 100, window: 1h}
    rules:
      - name: gpu-fell-off-the-bus
        to: [FAULTED]
        health: {componentClasses: [GPU], errorCodes: ["79"]}
`

// TestReleaseNamesTheRemainingHold: a device quarantined by a policy rule
// (an XID 79 through the satellite's door) and by an operator; the
// operator's release through the API, `ironlink release` and the web view
// each ends the operator's hold only and says so, naming the policy's hold
// that keeps the device quarantined (real hub, satellite, PostgreSQL).
func TestReleaseNamesTheRemainingHold(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(xidPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFleetWith(t, 6, fleetOptions{hubArgs: []string{"--policy-file", path, "--policy-interval", "1s"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const policyHold = "policy:gpu-fell-off-the-bus"
	var target *ironlinkv1.Device
	harness.Eventually(t, 60*time.Second, func() error {
		r, err := f.api.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: site,
			Statuses: []ironlinkv1.OperationalStatus{ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE}})
		if err != nil || len(r.GetDevices()) == 0 {
			return fmt.Errorf("no AVAILABLE device at the hub yet (%v)", err)
		}
		target = r.GetDevices()[0]
		return nil
	})
	id, name := target.GetDeviceId(), target.GetName()
	ref := site + "/" + name // node-001…node-003 are at both sites
	// policy show names the rule's health filter in the file's keys
	f.expect(f.run("policy", "show", site), 0, []string{"HEALTH", "componentClasses=GPU errorCodes=79"}, nil)
	door, err := healthsim.Dial(f.healthSock)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = door.Close() }()
	xid79, err := healthsim.Lookup("xid79")
	if err != nil {
		t.Fatal(err)
	}
	if err := door.Send(ctx, xid79.Event(name, 3, time.Now(), false)); err != nil {
		t.Fatalf("door: %v", err)
	}
	holders := func() []string {
		g, err := f.api.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: id})
		if err != nil {
			t.Fatal(err)
		}
		var hs []string
		for _, h := range g.GetQuarantineHolds() {
			hs = append(hs, h.GetHolder())
		}
		return hs
	}
	harness.Eventually(t, 60*time.Second, func() error {
		if hs := holders(); len(hs) != 1 || hs[0] != policyHold {
			return fmt.Errorf("holds %v, want the policy's %s", hs, policyHold)
		}
		return nil
	})
	onlyPolicy := func(via string) {
		t.Helper()
		if hs := holders(); len(hs) != 1 || hs[0] != policyHold {
			t.Fatalf("after the release through %s the holds are %v, want only %s", via, hs, policyHold)
		}
	}

	// The API: the plan names the hold released and the one that remains.
	if _, err := f.api.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: id, Reason: "checking the GPU"}); err != nil {
		t.Fatal(err)
	}
	rel, err := f.api.ReleaseDevice(ctx, &ironlinkv1.ReleaseDeviceRequest{DeviceId: id, Reason: "GPU fine"})
	if err != nil {
		t.Fatal(err)
	}
	p := rel.GetPlan()
	if p.GetOutcome() != ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_STILL_HELD || strings.Join(p.GetReleasedHolders(), ",") != "operator" ||
		len(p.GetRemainingHolds()) != 1 || p.GetRemainingHolds()[0].GetHolder() != policyHold {
		t.Fatalf("ReleaseDevice plan %v, want STILL_HELD, operator released, %s remaining", p, policyHold)
	}
	onlyPolicy("the API")

	// The CLI: the dry run and the release say which hold remains.
	f.expect(f.run("quarantine", ref, "--reason", "checking the GPU", "--wait", "--timeout", "60s"), 0, nil, nil)
	f.expect(f.run("release", ref, "--reason", "GPU fine", "--dry-run"), 0,
		[]string{"would release: hold operator released; still quarantined, held by " + policyHold}, []string{"dry run: nothing was changed"})
	f.expect(f.run("release", ref, "--reason", "GPU fine"), 0,
		[]string{site + "/" + name + ": release requested: hold operator released; still quarantined, held by " + policyHold}, nil)
	onlyPolicy("ironlink release")
	// With only the policy's hold left, a release is refused and names it.
	f.expect(f.run("release", ref, "--reason", "again"), ctl.ExitRefused, nil, []string{"held only by " + policyHold, "(--all-holds)"})

	// The web view: the form's POST lands on the device page, which says
	// what the release did and which hold remains.
	f.expect(f.run("quarantine", ref, "--reason", "checking the GPU", "--wait", "--timeout", "60s"), 0, nil, nil)
	tc, err := tlsutil.ClientConfig(f.ca, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+f.web+"/devices/"+id+"/release",
		strings.NewReader(url.Values{"reason": {"GPU fine"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-User", "ops-admin")
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: tc}}).Do(req) // follows the 303 to the device page
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	page := string(body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Request.URL.RawQuery, "release=STILL_HELD") ||
		!strings.Contains(page, `id="release-result" data-outcome="RELEASE_OUTCOME_STILL_HELD"`) ||
		!strings.Contains(page, "stays quarantined: another hold remains</strong>; still quarantined, held by "+policyHold) {
		t.Fatalf("web release: %d at %s, the page does not name the remaining hold:\n%.3000s", resp.StatusCode, resp.Request.URL, page)
	}
	onlyPolicy("the web view")
}

package web_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/fleet"
	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/remediation"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/web"
	"github.com/ironlink/ironlink/hub/web/webtest"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// remediationView serves the fleet view with the remediation API over st,
// without the hub's remediation engine: the ladders and handoffs the test
// writes stay as written (a running engine under a policy without their
// rule would abandon the ladders); file is the policy in force. It returns
// the view's URL.
func remediationView(t *testing.T, st *store.Store, file *policy.File) string {
	t.Helper()
	log := testlog.New(t)
	path, _ := webtest.WriteRoster(t, t.TempDir(), map[string][]string{"ops-read": {auth.ScopeOperationsRead}})
	roster, err := auth.LoadRoster(path)
	if err != nil {
		t.Fatal(err)
	}
	actor := func(ctx context.Context) string {
		if id, ok := authn.FromContext(ctx); ok {
			return id.ClientID
		}
		return "anonymous"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(web.Config{Addr: ln.Addr().String(), Auth: web.AuthProxy, TrustedProxies: "127.0.0.1", Plaintext: true},
		fleet.NewServer(st, actor, log), st, func() *auth.Roster { return roster }, log)
	if err != nil {
		t.Fatal(err)
	}
	srv.SetRemediation(remediation.NewAPI(st, func() *policy.File { return file }, actor, log))
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { hs.Close() })
	return "http://" + ln.Addr().String()
}

// The device page's Remediation section in Chromium shows why a ladder
// waits (the per-rack in-flight limit with the rack and the limit; a
// refusal of the operations' checks with its reason) and a handoff's
// webhook delivery attempts (a 500, a timeout, then the 204 that
// delivered it), as `ironlink explain` does.
func TestDeviceRemediationInChromium(t *testing.T) {
	newTab := browser(t)
	ctx := context.Background()
	st, _ := storetest.New(t, testlog.New(t))
	site := storetest.NewSite(t, st, "alpha", 3, nil)
	var ups []store.DeviceUpdate
	for i, id := range site.IDs {
		ups = append(ups, store.DeviceUpdate{DeviceID: id, ObservedTime: time.Now().UTC(),
			Facts: &store.Facts{Name: fmt.Sprintf("gpu-%02d", i), ResourceClass: "gpu-h100"}})
	}
	site.Send(ups)
	dev := func(i int) store.RemediationDevice {
		return store.RemediationDevice{DeviceID: site.IDs[i], Site: "alpha", Rule: "gpu-fatal", HoldGeneration: 1,
			Labels: map[string]string{"rack": "r12"}}
	}

	// gpu-00 waits for rack r12's in-flight limit (the detail as the
	// engine words it); gpu-01 for a refusal of the operations' checks.
	ladder := &policy.Ladder{Steps: []policy.LadderStep{{Kind: "REBOOT", Timeout: 15 * time.Minute}, {Kind: "REPROVISION", Timeout: time.Hour}},
		Settle: 10 * time.Minute, Budget: policy.Budget{Ladders: 3, Window: 7 * 24 * time.Hour}, Release: policy.ReleaseAutomatic}
	p := policy.SitePolicy{Enabled: true, Rules: []policy.Rule{{Name: "gpu-fatal", Ladder: ladder}},
		Remediation: policy.Remediation{MaxInFlight: 5, PerLabel: []policy.LabelInFlight{{Label: "rack", MaxInFlight: 1}}}}
	reason, detail := remediation.Blocked(p, dev(0), remediation.Safety{InFlight: 1, DomainInFlight: map[string]int{"rack": 1}}, time.Now())
	if reason != remediation.WaitDomainInFlight {
		t.Fatalf("Blocked = %q %q, want %s", reason, detail, remediation.WaitDomainInFlight)
	}
	l0, ok, err := st.StartLadder(ctx, dev(0), 2, "gpu fault")
	if err != nil || !ok {
		t.Fatalf("start ladder: %v %v", ok, err)
	}
	if err := st.SetLadderWaiting(ctx, l0, reason, detail); err != nil {
		t.Fatal(err)
	}
	l1, ok, err := st.StartLadder(ctx, dev(1), 2, "gpu fault")
	if err != nil || !ok {
		t.Fatalf("start ladder: %v %v", ok, err)
	}
	refusal := operations.ReasonDeviceRemoved + ": device " + site.IDs[1] + " was removed from Ironic"
	if err := st.SetLadderWaiting(ctx, l1, remediation.WaitPrecondition, refusal); err != nil {
		t.Fatal(err)
	}

	// gpu-02 was handed off; its webhook got a 500, then no answer, then
	// a 204.
	h, ok, err := st.CreateHandoff(ctx, store.NewHandoff{Device: dev(2), Reason: store.HandoffLadderExhausted,
		Detail: "2 steps tried, the device is still faulted", Webhook: true})
	if err != nil || !ok {
		t.Fatalf("create handoff: %v %v", ok, err)
	}
	t0 := time.Now().Add(-3 * time.Minute)
	for i, a := range []store.WebhookAttempt{
		{Attempt: 1, StatusCode: 500, Error: "500 Internal Server Error", Duration: 12 * time.Millisecond, AttemptedAt: t0},
		{Attempt: 2, Error: "context deadline exceeded", Duration: 10 * time.Second, AttemptedAt: t0.Add(time.Minute)},
		{Attempt: 3, StatusCode: 204, Duration: 3 * time.Millisecond, AttemptedAt: t0.Add(2 * time.Minute)},
	} {
		if err := st.RecordWebhookAttempt(ctx, h.ID, a, i == 2, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}

	url := remediationView(t, st, &policy.File{Default: p})
	tab := newTab("ops-read")
	text := func(sel string) string {
		var s string
		eval(t, tab, `(document.querySelector('`+sel+`') || {textContent: ''}).textContent`, &s)
		return s
	}

	run(t, tab, "open gpu-00", chromedp.Navigate(url+"/devices/"+site.IDs[0]), chromedp.WaitVisible(chromedp.CSS("#remediation")))
	w := text("#ladder-waiting")
	for _, want := range []string{"Waiting: MaxInFlightPerLabel", "failure domain", "rack=r12", "at most 1 per rack"} {
		if !strings.Contains(w, want) {
			t.Errorf("gpu-00 waiting %q lacks %q", w, want)
		}
	}
	if r, l := text("#ladder-run"), text("#remediation-ladder"); !strings.Contains(r, "RUNNING, step 1 of 2") ||
		!strings.Contains(l, "gpu-fatal") || !strings.Contains(l, "1. REBOOT (timeout 15m0s), 2. REPROVISION (timeout 1h0m0s)") {
		t.Errorf("gpu-00 ladder run %q, ladder %q", r, l)
	}
	shoot(t, tab, "device-remediation-waiting-rack.png")

	run(t, tab, "open gpu-01", chromedp.Navigate(url+"/devices/"+site.IDs[1]), chromedp.WaitVisible(chromedp.CSS("#remediation")))
	w = text("#ladder-waiting")
	for _, want := range []string{"Waiting: Precondition", "refuse", refusal} {
		if !strings.Contains(w, want) {
			t.Errorf("gpu-01 waiting %q lacks %q", w, want)
		}
	}
	shoot(t, tab, "device-remediation-waiting-precondition.png")

	run(t, tab, "open gpu-02", chromedp.Navigate(url+"/devices/"+site.IDs[2]), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf("#handoff-%d", h.ID))))
	hand := text(fmt.Sprintf("#handoff-%d", h.ID))
	for _, want := range []string{"OPEN", "LadderExhausted", "Webhook DELIVERED, 3 attempts"} {
		if !strings.Contains(hand, want) {
			t.Errorf("gpu-02 handoff %q lacks %q", hand, want)
		}
	}
	var rows []string
	eval(t, tab, `[...document.querySelectorAll('.webhook-attempts tbody tr')].map(r => r.dataset.attempt + ' ' + r.cells[2].textContent + ' ' + r.cells[3].textContent)`, &rows)
	want := []string{"1 500 500 Internal Server Error in 12ms", "2 none no answer in 10s: context deadline exceeded", "3 204 204 in 3ms"}
	if strings.Join(rows, "|") != strings.Join(want, "|") {
		t.Errorf("webhook attempts %q, want %q", rows, want)
	}
	if w := text("#ladder-waiting"); w != "" {
		t.Errorf("gpu-02 (handed off) shows a wait: %q", w)
	}
	shoot(t, tab, "device-remediation-handoff-webhook.png")
}

// Package web_test drives the hub's fleet view (hub/web) in a real headless
// Chromium (Debian's chromium package) with chromedp, against a real hub
// (hub/app in this process, serving gRPC and the view) over a real
// PostgreSQL database (internal/pgtest), with sites seeded through the
// hub's store and one site served by a scripted satellite (test/faults/satsim)
// that applies commands, so a quarantine from the page reaches SUCCEEDED.
//
// Screenshots go to test/web/screenshots/ (git-ignored; override with
// IRONLINK_WEB_SCREENSHOTS); their paths are logged (go test -v).
// Without chromium the tests skip, except under CI=true, where they fail.
package web_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/app"
	hubstatus "github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/web"
	"github.com/ironlink/ironlink/hub/web/webtest"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

// chromiumPath finds Debian's chromium; without it the test skips with a
// clear message, or fails under CI=true.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed, and CI=true requires the browser tests: apt-get install -y chromium")
	}
	t.Skip("chromium is not installed: apt-get install -y chromium to run the fleet view's browser tests")
	return ""
}

// hubEnv is a running hub with its fleet view.
type hubEnv struct {
	webURL   string
	grpcAddr string
	st       *store.Store
	ops      map[string]*webtest.Operator
	logFile  string
}

// startHub runs hub/app (gRPC without TLS or client auth, so the scripted
// satellite can connect; the fleet view in proxy mode trusting loopback,
// authenticating against a roster of ops-write and ops-read) until the test ends.
func startHub(t *testing.T) *hubEnv {
	t.Helper()
	dbURL := pgtest.NewDatabase(t)
	dir := t.TempDir()
	roster, ops := webtest.WriteRoster(t, dir, map[string][]string{
		"ops-write": {auth.ScopeOperationsRead, auth.ScopeOperationsWrite},
		"ops-read":  {auth.ScopeOperationsRead},
	})
	e := &hubEnv{grpcAddr: harness.FreeAddr(t), ops: ops, logFile: filepath.Join(dir, "hub.log")}
	webAddr := harness.FreeAddr(t)
	e.webURL = "http://" + webAddr
	lf, err := os.Create(e.logFile)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts := app.Options{Listen: e.grpcAddr, DatabaseURL: dbURL, Replica: "web-test", Plaintext: true, NoAuth: true,
		RosterPath: roster, StaleAfter: time.Hour,
		Web: web.Config{Addr: webAddr, Auth: web.AuthProxy, TrustedProxies: "127.0.0.1", Refresh: time.Second}}
	opts.Link.CommandSweep = 500 * time.Millisecond
	cfg, err := opts.Validate()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, cfg, log) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("hub: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("hub did not stop")
		}
		lf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(e.logFile)
			t.Logf("---- hub log (tail) ----\n%s", tail(string(b), 60))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(e.webURL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("hub exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("fleet view did not come up: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.st = storetest.Open(t, dbURL, nil)
	return e
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// browser starts a headless Chromium with the flags a root sandbox needs
// and returns a tab factory: each tab sends the trusted proxy's user header
// naming user (standing in for oauth2-proxy in front of the hub).
func browser(t *testing.T) func(user string) context.Context {
	t.Helper()
	path := chromiumPath(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1440, 1000),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	if err := chromedp.Do(bctx); err != nil {
		cancelBrowser()
		cancelAlloc()
		t.Fatalf("start chromium %s: %v", path, err)
	}
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	return func(user string) context.Context {
		tctx, cancel := chromedp.NewContext(bctx)
		t.Cleanup(cancel)
		if _, err := chromedp.Call(tctx, network.Enable, network.EnableParams{}); err != nil {
			t.Fatalf("tab for %s: %v", user, err)
		}
		if _, err := chromedp.Call(tctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{web.DefaultUserHeader: user}}); err != nil {
			t.Fatalf("tab for %s: %v", user, err)
		}
		return tctx
	}
}

// screenshotDir is where the screenshots go: test/web/screenshots.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("IRONLINK_WEB_SCREENSHOTS")
	if dir == "" {
		_, self, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(self), "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func shoot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(screenshotDir(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// clickNav clicks sel, which navigates, and waits until the new document
// has loaded and shows waitSel (the old document may show it too, so a
// marker set on the old window tells them apart).
func clickNav(t *testing.T, ctx context.Context, what, sel, waitSel string) {
	t.Helper()
	var mark int
	eval(t, ctx, `window.__beforeNav = 1`, &mark)
	run(t, ctx, what, chromedp.Click(chromedp.CSS(sel)))
	js := `!window.__beforeNav && document.readyState === 'complete' && !!document.querySelector(` + "`" + waitSel + "`" + `)`
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Evaluations during the navigation fail (their document is gone): retry.
		ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, err := chromedp.Run(ectx, chromedp.Evaluate[bool](js))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the next page never showed %s (last error %v)", what, waitSel, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// eval evaluates js in the tab (awaiting a promise) and decodes its value into out.
func eval[T any](t *testing.T, ctx context.Context, js string, out *T) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	*out = v
}

// seeded is the fleet the browser test looks at.
var seeded = map[string][]webtest.Device{
	"alpha": {{Name: "gpu-a01", Status: hubstatus.Faulted}, {Name: "gpu-a02", Status: hubstatus.Faulted}, {Name: "gpu-a03", Status: hubstatus.Faulted},
		{Name: "gpu-a04", Status: hubstatus.Maintenance}, {Name: "gpu-a05", Status: hubstatus.Available}, {Name: "gpu-a06", Status: hubstatus.Available},
		{Name: "gpu-a07", Status: hubstatus.InService}, {Name: "gpu-a08", Status: hubstatus.InService}, {Name: "gpu-a09", Status: hubstatus.InService},
		{Name: "gpu-a10", Status: hubstatus.InService}, {Name: "gpu-a11", Status: hubstatus.Held}, {Name: "gpu-a12", Status: hubstatus.Onboarding}},
	"beta": {{Name: "cpu-b01", Status: hubstatus.Validating}, {Name: "cpu-b02", Status: hubstatus.Allocated}, {Name: "cpu-b03", Status: hubstatus.Available},
		{Name: "cpu-b04", Status: hubstatus.Faulted}, {Name: "cpu-b05", Status: hubstatus.Maintenance}},
	"gamma": {{Name: "old-g01", Status: hubstatus.Available}, {Name: "old-g02", Status: hubstatus.Faulted}, {Name: "old-g03", Status: hubstatus.InService}},
}

const satSite, satDevices = "delta", 6

func TestFleetViewInChromium(t *testing.T) {
	newTab := browser(t)
	e := startHub(t)
	ctx := context.Background()
	ids := map[string][]string{}
	for site, devs := range seeded {
		got, err := webtest.SeedSiteAt(ctx, e.st, site, time.Now().Add(-3*time.Hour), devs)
		if err != nil {
			t.Fatal(err)
		}
		ids[site] = got
	}
	// gpu-a01 has a history: IN_SERVICE, then MAINTENANCE, then FAULTED again
	// (its seeded status, so the counts stay as seeded).
	for i, st := range []hubstatus.Status{hubstatus.InService, hubstatus.Maintenance, hubstatus.Faulted} {
		if err := webtest.Report(ctx, e.st, "alpha", time.Now().Add(time.Duration(i-3)*40*time.Minute), map[string]hubstatus.Status{ids["alpha"][0]: st}); err != nil {
			t.Fatal(err)
		}
	}
	// gamma went silent two hours ago: the hub's stale sweep makes it UNREACHABLE.
	if _, err := e.st.Pool().Exec(ctx, `UPDATE sites SET last_seen_at = now() - interval '2 hours' WHERE name = 'gamma'`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.MarkStaleSites(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	// delta is served by a scripted satellite that applies each command
	// after 1.5 s, so the page can show SENT before SUCCEEDED.
	var cmdMu sync.Mutex
	var cmds []*ironlinkv1.Command
	sat := satsim.New(satsim.Config{Site: satSite, Addr: e.grpcAddr, Devices: satDevices, OnCommand: func(c *ironlinkv1.Command) *ironlinkv1.CommandResult {
		cmdMu.Lock()
		cmds = append(cmds, c)
		cmdMu.Unlock()
		time.Sleep(1500 * time.Millisecond)
		return nil // success
	}})
	sctx, stopSat := context.WithCancel(ctx)
	satDone := make(chan struct{})
	go func() { sat.Run(sctx); close(satDone) }()
	t.Cleanup(func() { stopSat(); <-satDone })
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if err := sat.WaitDrained(wctx); err != nil {
		t.Fatalf("scripted satellite: %v", err)
	}
	cancel()

	// Expected counts: per site and status, from the seed.
	want := map[string]map[string]int{}
	for site, devs := range seeded {
		want[site] = map[string]int{}
		for _, d := range devs {
			st := string(d.Status)
			if site == "gamma" {
				st = string(hubstatus.Unreachable)
			}
			want[site][st]++
		}
	}
	want[satSite] = map[string]int{string(hubstatus.Validating): satDevices} // satsim reports every condition True

	writer := newTab("ops-write")
	t.Run("overview counts", func(t *testing.T) {
		run(t, writer, "open the overview", chromedp.Navigate(e.webURL+"/"), chromedp.WaitVisible(chromedp.CSS("#matrix")))
		var cells map[string][]string
		eval(t, writer, `Object.fromEntries([...document.querySelectorAll('#matrix tbody tr')].map(tr =>
			[tr.dataset.site, [...tr.querySelectorAll('td')].map(td => td.textContent.trim())]))`, &cells)
		for site, byStatus := range want {
			row, ok := cells[site]
			if !ok || len(row) != len(hubstatus.All)+1 {
				t.Fatalf("matrix row of %s: %v", site, row)
			}
			total := 0
			for i, st := range hubstatus.All {
				if row[i] != fmt.Sprint(byStatus[string(st)]) {
					t.Errorf("matrix %s × %s shows %q, want %d", site, st, row[i], byStatus[string(st)])
				}
				total += byStatus[string(st)]
			}
			if row[len(row)-1] != fmt.Sprint(total) {
				t.Errorf("matrix %s total shows %q, want %d", site, row[len(row)-1], total)
			}
		}
		var sites map[string]string
		eval(t, writer, `Object.fromEntries([...document.querySelectorAll('#sites tbody tr')].map(tr =>
			[tr.dataset.site, tr.className + '|' + tr.children[1].textContent.trim()]))`, &sites)
		if s := sites["gamma"]; !strings.HasPrefix(s, "stale|") || !strings.Contains(s, "unreachable") || !strings.Contains(s, "stale") {
			t.Errorf("gamma's site row %q: want marked stale and unreachable", s)
		}
		if s := sites[satSite]; strings.Contains(s, "stale") || !strings.Contains(s, "connected") {
			t.Errorf("%s's site row %q: want connected, not stale", satSite, s)
		}
		if s := sites["alpha"]; !strings.Contains(s, "disconnected") {
			t.Errorf("alpha's site row %q: want disconnected", s)
		}
		shoot(t, writer, "overview.png")
	})

	t.Run("matrix cell opens the filtered list", func(t *testing.T) {
		run(t, writer, "open the overview", chromedp.Navigate(e.webURL+"/"), chromedp.WaitVisible(chromedp.CSS("#matrix")))
		clickNav(t, writer, "click alpha × FAULTED", `#matrix tr[data-site="alpha"] a[href="/devices?site=alpha&status=FAULTED"]`, "#devices")
		var got struct {
			URL      string
			Statuses []string
			Sites    []string
			Count    string
		}
		eval(t, writer, `({URL: location.pathname + location.search,
			Statuses: [...document.querySelectorAll('#devices tbody tr')].map(tr => tr.dataset.status),
			Sites: [...document.querySelectorAll('#devices tbody tr')].map(tr => tr.children[2].textContent.trim()), // after the checkbox and the name
			Count: document.querySelector('#count strong').textContent})`, &got)
		if got.URL != "/devices?site=alpha&status=FAULTED" || len(got.Statuses) != want["alpha"]["FAULTED"] || got.Count != fmt.Sprint(want["alpha"]["FAULTED"]) {
			t.Fatalf("filtered list: %+v, want %d FAULTED devices of alpha", got, want["alpha"]["FAULTED"])
		}
		for i := range got.Statuses {
			if got.Statuses[i] != "FAULTED" || got.Sites[i] != "alpha" {
				t.Fatalf("row %d is %s at %s", i, got.Statuses[i], got.Sites[i])
			}
		}
		// The checkboxes of the filter form reflect the filter; ticking
		// MAINTENANCE as well widens it.
		run(t, writer, "tick MAINTENANCE", chromedp.Click(chromedp.CSS(`#filters input[name=status][value=MAINTENANCE]`)))
		clickNav(t, writer, "apply the filter", `#filters button[type=submit]`, "#devices")
		var statuses []string
		eval(t, writer, `[...document.querySelectorAll('#devices tbody tr')].map(tr => tr.dataset.status)`, &statuses)
		sort.Strings(statuses)
		if wantN := want["alpha"]["FAULTED"] + want["alpha"]["MAINTENANCE"]; len(statuses) != wantN || statuses[0] != "FAULTED" || statuses[len(statuses)-1] != "MAINTENANCE" {
			t.Fatalf("FAULTED+MAINTENANCE of alpha: %v", statuses)
		}
		shoot(t, writer, "devices-filtered.png")
	})

	t.Run("search by name and paging", func(t *testing.T) {
		run(t, writer, "type CPU-B0", chromedp.Navigate(e.webURL+"/devices"), chromedp.WaitVisible(chromedp.CSS("#filters")),
			chromedp.SendKeys(chromedp.CSS(`#filters input[name=q]`), "CPU-B0"))
		clickNav(t, writer, "search", `#filters button[type=submit]`, "#devices")
		var names []string
		eval(t, writer, `[...document.querySelectorAll('#devices tbody tr td:nth-child(2) a')].map(a => a.textContent)`, &names)
		if !slices.Equal(sortedCopy(names), []string{"cpu-b01", "cpu-b02", "cpu-b03", "cpu-b04", "cpu-b05"}) {
			t.Fatalf("search CPU-B0 found %v", names)
		}
		// Keyset pages of 7 through all 26 devices: no device twice, none missing.
		seen := map[string]bool{}
		run(t, writer, "first page", chromedp.Navigate(e.webURL+"/devices?size=7"), chromedp.WaitVisible(chromedp.CSS("#devices")))
		for page := 0; ; page++ {
			var rows []string
			var next bool
			eval(t, writer, `[...document.querySelectorAll('#devices tbody tr')].map(tr => tr.dataset.id)`, &rows)
			eval(t, writer, `!!document.querySelector('#next-page')`, &next)
			for _, id := range rows {
				if seen[id] {
					t.Fatalf("page %d repeats %s", page, id)
				}
				seen[id] = true
			}
			if !next {
				break
			}
			clickNav(t, writer, "next page", "#next-page", "#first-page")
		}
		if n := len(seeded["alpha"]) + len(seeded["beta"]) + len(seeded["gamma"]) + satDevices; len(seen) != n {
			t.Fatalf("paging showed %d devices, want %d", len(seen), n)
		}
	})

	dev := sat.Devices()[0]
	t.Run("quarantine from the page reaches SUCCEEDED without a reload", func(t *testing.T) {
		run(t, writer, "open the device", chromedp.Navigate(e.webURL+"/devices/"+dev), chromedp.WaitVisible(chromedp.CSS("#timeline")))
		var rects int
		eval(t, writer, `document.querySelectorAll('#timeline rect.seg').length`, &rects)
		if rects < 8 { // a status bar and seven condition bars at least
			t.Fatalf("timeline has %d bars", rects)
		}
		var mark string
		eval(t, writer, `window.__sameDocument = 'yes'`, &mark)
		run(t, writer, "quarantine", chromedp.SendKeys(chromedp.CSS("#reason"), "GPU 3 throws Xid 79"),
			chromedp.Click(chromedp.CSS("#quarantine-btn")), chromedp.WaitVisible(chromedp.CSS("#command")))
		var states []string
		shotSent := false
		deadline := time.Now().Add(45 * time.Second)
		for {
			var st string
			eval(t, writer, `(document.querySelector('#command') || {dataset: {}}).dataset.state || ''`, &st)
			if len(states) == 0 || states[len(states)-1] != st {
				states = append(states, st)
			}
			if st == "SENT" && !shotSent {
				shoot(t, writer, "device-command-sent.png")
				shotSent = true
			}
			if st == "SUCCEEDED" || st == "FAILED" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("command states seen %v, never final", states)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if states[len(states)-1] != "SUCCEEDED" || (states[0] != "PENDING" && states[0] != "SENT") {
			t.Fatalf("command states seen %v, want PENDING/SENT … SUCCEEDED", states)
		}
		t.Logf("command progress seen on the page: %s", strings.Join(states, " → "))
		var same string
		eval(t, writer, `window.__sameDocument || ''`, &same)
		if same != "yes" {
			t.Fatal("the page reloaded during the quarantine")
		}
		// The live region refreshes by itself: status and history follow.
		var status, who string
		deadline = time.Now().Add(15 * time.Second)
		for {
			eval(t, writer, `document.querySelector('#status').textContent.trim()`, &status)
			eval(t, writer, `(document.querySelector('#quarantine-history tbody tr .who-cell') || {textContent: ''}).textContent`, &who)
			if status == "QUARANTINED" && who == "ops-write" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the quarantine the page shows status %q, history actor %q", status, who)
			}
			time.Sleep(200 * time.Millisecond)
		}
		eval(t, writer, `window.__sameDocument || ''`, &same)
		if same != "yes" {
			t.Fatal("the page reloaded while refreshing")
		}
		cmdMu.Lock()
		n := len(cmds)
		cmdMu.Unlock()
		if n == 0 {
			t.Fatal("the satellite never received the command")
		}
		shoot(t, writer, "device-quarantined.png")
	})

	t.Run("device with a history", func(t *testing.T) {
		run(t, writer, "open gpu-a01", chromedp.Navigate(e.webURL+"/devices/"+ids["alpha"][0]), chromedp.WaitVisible(chromedp.CSS("#timeline")))
		var classes []string
		eval(t, writer, `[...document.querySelectorAll('#timeline rect.seg')].map(r => r.getAttribute('class'))`, &classes)
		for _, want := range []string{"seg st-FAULTED", "seg st-IN_SERVICE", "seg st-MAINTENANCE", "seg cond-False", "seg cond-True"} {
			if !slices.Contains(classes, want) {
				t.Errorf("timeline lacks a %q bar: %v", want, classes)
			}
		}
		var status string
		eval(t, writer, `document.querySelector('#status').textContent.trim()`, &status)
		if status != "FAULTED" {
			t.Errorf("gpu-a01 shows %q, want FAULTED", status)
		}
		shoot(t, writer, "device-history.png")
	})

	t.Run("read-only identity sees no buttons and is refused", func(t *testing.T) {
		reader := newTab("ops-read")
		run(t, reader, "open the device", chromedp.Navigate(e.webURL+"/devices/"+dev), chromedp.WaitVisible(chromedp.CSS("#timeline")))
		var buttons int
		var note, who string
		eval(t, reader, `document.querySelectorAll('#quarantine-btn, #release-btn, form[action$="/quarantine"], form[action$="/release"]').length`, &buttons)
		eval(t, reader, `(document.querySelector('#read-only-note') || {textContent: ''}).textContent`, &note)
		eval(t, reader, `document.querySelector('#who').textContent`, &who)
		if buttons != 0 || !strings.Contains(note, "Read-only") || !strings.Contains(who, "read-only") {
			t.Fatalf("read-only page: %d controls, note %q, header %q", buttons, note, who)
		}
		shoot(t, reader, "device-read-only.png")
		before := commandCount(t, e, dev)
		for _, action := range []string{"release", "quarantine"} {
			var code int
			eval(t, reader, `fetch('/devices/`+dev+`/`+action+`', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'},
				body: 'reason=sneaky'}).then(r => r.status)`, &code)
			if code != http.StatusForbidden {
				t.Fatalf("read-only POST %s: %d, want 403", action, code)
			}
		}
		if after := commandCount(t, e, dev); after != before {
			t.Fatalf("read-only POSTs changed the device's commands: %d → %d", before, after)
		}
	})
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	sort.Strings(c)
	return c
}

func commandCount(t *testing.T, e *hubEnv, dev string) int {
	t.Helper()
	var n int
	if err := e.st.Pool().QueryRow(context.Background(), `SELECT (SELECT count(*) FROM commands WHERE device_id = $1) +
		(SELECT count(*) FROM impairment_history WHERE device_id = $1)`, dev).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

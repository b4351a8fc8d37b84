package web_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/web/webtest"
	"github.com/ironlink/ironlink/internal/condition"
)

// TestConsoleInChromium drives the console pages of issue 25 in Chromium:
// the site page, the device list sorted and filtered by a selector, two
// ticked rows quarantined through the preview with its count, a device
// page opened by name with its holds, a hold set on the holds page, the
// operations (a refused start shows the hub's reason), commands and
// policy pages, a read-only identity's pages, and the list and a device
// page in a phone-width (390 px) window. Every page is screenshotted.
func TestConsoleInChromium(t *testing.T) {
	newTab := browser(t)
	e := startHub(t)
	ctx := context.Background()
	for site, devs := range seeded {
		if _, err := webtest.SeedSiteAt(ctx, e.st, site, time.Now().Add(-3*time.Hour), devs); err != nil {
			t.Fatal(err)
		}
	}
	writer := newTab("ops-write")
	text := func(tab context.Context, js string) string {
		t.Helper()
		var s string
		eval(t, tab, js, &s)
		return s
	}

	t.Run("site page", func(t *testing.T) {
		run(t, writer, "open /sites/alpha", chromedp.Navigate(e.webURL+"/sites/alpha"), chromedp.WaitVisible(chromedp.CSS("#site-counts")))
		if got := text(writer, `document.querySelector('#site-counts td.total').textContent.trim()`); got != "12" {
			t.Errorf("alpha's total shows %q, want 12", got)
		}
		shoot(t, writer, "console-site.png")
	})

	t.Run("list sorted by name, selector, ticked rows quarantined", func(t *testing.T) {
		run(t, writer, "open the list", chromedp.Navigate(e.webURL+"/devices?site=alpha"), chromedp.WaitVisible(chromedp.CSS("#devices")))
		var names []string
		eval(t, writer, `[...document.querySelectorAll('#devices tbody tr td:nth-child(2) a')].map(a => a.textContent)`, &names)
		if len(names) != 12 || names[0] != "gpu-a01" || names[11] != "gpu-a12" {
			t.Fatalf("alpha by name: %v", names)
		}
		run(t, writer, "type a selector", chromedp.Navigate(e.webURL+"/devices"), chromedp.WaitVisible(chromedp.CSS("#selector")),
			chromedp.SendKeys(chromedp.CSS("#selector"), "site=alpha,status=available|held"))
		clickNav(t, writer, "apply the selector", `#filters button[type=submit]`, "#devices")
		eval(t, writer, `[...document.querySelectorAll('#devices tbody tr td:nth-child(2) a')].map(a => a.textContent)`, &names)
		if strings.Join(names, ",") != "gpu-a05,gpu-a06,gpu-a11" {
			t.Fatalf("selector site=alpha,status=available|held lists %v", names)
		}
		shoot(t, writer, "console-devices-selector.png")
		var ticked int
		eval(t, writer, `(() => { const all = document.querySelector('[data-check-all=device]'); all.click();
			const n = document.querySelectorAll('#devices input[name=device]:checked').length; all.click(); return n; })()`, &ticked)
		if ticked != 3 {
			t.Fatalf("select-all ticked %d rows, want 3", ticked)
		}
		run(t, writer, "tick two rows", chromedp.Click(chromedp.CSS(`#devices tbody tr:nth-child(1) input[name=device]`)),
			chromedp.Click(chromedp.CSS(`#devices tbody tr:nth-child(3) input[name=device]`)))
		clickNav(t, writer, "quarantine selected", "#bulk-quarantine", "#bulk-confirm")
		if got := text(writer, `document.querySelector('#bulk-count').textContent`); got != "2" {
			t.Fatalf("preview count %q, want 2", got)
		}
		shoot(t, writer, "console-bulk-preview.png")
		run(t, writer, "reason", chromedp.SendKeys(chromedp.CSS("#bulk-reason"), "rack a PDU swap"))
		clickNav(t, writer, "confirm", "#bulk-go", "#bulk-result")
		if got := text(writer, `document.querySelector('#bulk-result').textContent`); !strings.Contains(got, "2 commands created") {
			t.Fatalf("bulk result %q", got)
		}
		shoot(t, writer, "console-bulk-done.png")
	})

	t.Run("device by name shows holds and release plan", func(t *testing.T) {
		run(t, writer, "open gpu-a11 by name", chromedp.Navigate(e.webURL+"/devices/alpha/gpu-a11"), chromedp.WaitVisible(chromedp.CSS("#device-holds")))
		if got := text(writer, `document.querySelector('#holds tbody').textContent`); !strings.Contains(got, "operator") || !strings.Contains(got, "rack a PDU swap") {
			t.Errorf("holds of gpu-a11: %q", got)
		}
		if got := text(writer, `(document.querySelector('#release-plan') || {dataset: {}}).dataset.outcome || ''`); got != "RELEASE_OUTCOME_RESTORED_NOT_OFFERED" {
			t.Errorf("release plan of a quarantined HELD device: %q, want RESTORED_NOT_OFFERED", got)
		}
		shoot(t, writer, "console-device.png")
	})

	t.Run("release every quarantined device of alpha by selector", func(t *testing.T) {
		run(t, writer, "type the selector", chromedp.Navigate(e.webURL+"/devices"), chromedp.WaitVisible(chromedp.CSS("#selector")),
			chromedp.SendKeys(chromedp.CSS("#selector"), "site=alpha,status=quarantined"))
		clickNav(t, writer, "apply", `#filters button[type=submit]`, "#sel-release")
		clickNav(t, writer, "release all", "#sel-release", "#bulk-confirm")
		var outcomes map[string]string
		eval(t, writer, `Object.fromEntries([...document.querySelectorAll('#bulk-outcomes li')].map(li => [li.dataset.outcome, li.querySelector('strong').textContent]))`, &outcomes)
		// gpu-a05 was AVAILABLE (offered) before its quarantine, gpu-a11 HELD.
		if outcomes["RELEASE_OUTCOME_RESTORED_OFFERED"] != "1" || outcomes["RELEASE_OUTCOME_RESTORED_NOT_OFFERED"] != "1" {
			t.Fatalf("release preview outcomes %v, want one offered again and one not", outcomes)
		}
		shoot(t, writer, "console-release-preview.png")
		run(t, writer, "reason", chromedp.SendKeys(chromedp.CSS("#bulk-reason"), "PDU swapped"))
		clickNav(t, writer, "confirm", "#bulk-go", "#bulk-result")
		if got := text(writer, `document.querySelector('#bulk-result').textContent`); !strings.Contains(got, "2 commands created") || !strings.Contains(got, "under request") {
			t.Fatalf("release result %q", got)
		}
		clickNav(t, writer, "the request's commands", `#bulk-result a`, "#commands")
		if got := text(writer, `String(document.querySelectorAll('#commands tbody tr[data-command]').length)`); got != "2" {
			t.Errorf("the request lists %s commands, want 2", got)
		}
		shoot(t, writer, "console-release-done.png")
	})

	t.Run("operation started, shown and cancelled", func(t *testing.T) {
		// beta's satellite offers operations but is not connected: the
		// operation stays PENDING, which cancels at once.
		if _, err := e.st.OpenLink(ctx, store.LinkHello{Site: "beta", BootID: uuid.NewString(), Replica: "elsewhere", Capabilities: []string{operations.Capability}}); err != nil {
			t.Fatal(err)
		}
		run(t, writer, "open /operations", chromedp.Navigate(e.webURL+"/operations"), chromedp.WaitVisible(chromedp.CSS("#operations")),
			chromedp.Click(chromedp.CSS("#op-start summary")), chromedp.SetValue(chromedp.CSS("#op-kind"), "POWER_ON"),
			chromedp.SendKeys(chromedp.CSS("#op-devices"), "beta/cpu-b03"), chromedp.SendKeys(chromedp.CSS("#op-reason"), "wake it"))
		clickNav(t, writer, "start", "#op-start-btn", "#op-facts")
		if got := text(writer, `document.querySelector('#op-state').textContent`); got != "PENDING" {
			t.Fatalf("new operation is %q", got)
		}
		shoot(t, writer, "console-operation.png")
		run(t, writer, "cancel reason", chromedp.SendKeys(chromedp.CSS("#cancel-reason"), "not needed"))
		clickNav(t, writer, "cancel", "#op-cancel-btn", `#op-facts[data-state="CANCELLED"]`)
		shoot(t, writer, "console-operation-cancelled.png")
	})

	t.Run("pending actions approved and rejected", func(t *testing.T) {
		// Two automatic quarantines the guard held (gpu-a02, gpu-a03 are FAULTED).
		for i, name := range []string{"gpu-a02", "gpu-a03"} {
			var dev string
			if err := e.st.Pool().QueryRow(ctx, `SELECT id::text FROM devices WHERE name = $1`, name).Scan(&dev); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			if _, _, err := e.st.RecordPolicyDecision(ctx, store.PolicyDecision{DeviceID: dev, Site: "alpha", Kind: store.DecisionKindQuarantine,
				TriggerID: int64(1000 + i), Action: "PENDING", Reason: "HeldByGuard", Detail: "1 of 12 devices in 1h would exceed max_devices 1",
				Rule: "faulted", From: "IN_SERVICE", To: "FAULTED", Trips: i == 0, WindowCount: 1, SiteDevices: 12, TriggeredAt: &now, DecidedAt: now,
				Cause: condition.Condition{Type: condition.ProvisioningHealthy, Status: condition.False, Reason: "DeployFailed", LastTransitionTime: now, ObservedTime: now}}); err != nil {
				t.Fatal(err)
			}
		}
		run(t, writer, "open /policy", chromedp.Navigate(e.webURL+"/policy?site=alpha"), chromedp.WaitVisible(chromedp.CSS("#pending-actions")))
		if got := text(writer, `document.querySelector('#policy-states tr[data-site=alpha]').dataset.tripped`); got != "true" {
			t.Errorf("alpha's guard shows tripped=%q", got)
		}
		shoot(t, writer, "console-policy-pending.png")
		run(t, writer, "tick the first", chromedp.Click(chromedp.CSS(`#pending-actions tbody tr:nth-child(1) input[name=id]`)),
			chromedp.SendKeys(chromedp.CSS("#pending-reason"), "confirmed bad"))
		clickNav(t, writer, "approve", "#approve-btn", "#policy-states")
		if got := text(writer, `String(document.querySelectorAll('#pending-actions tbody tr').length)`); got != "1" {
			t.Fatalf("after approving one of two, %s pending", got)
		}
		run(t, writer, "tick the other", chromedp.Click(chromedp.CSS(`#pending-actions tbody tr:nth-child(1) input[name=id]`)),
			chromedp.SendKeys(chromedp.CSS("#pending-reason"), "flaky, leave it"))
		clickNav(t, writer, "reject", "#reject-btn", "#no-pending")
		var approved, rejected int
		if err := e.st.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'APPROVED'), count(*) FILTER (WHERE state = 'REJECTED') FROM policy_pending_actions`).Scan(&approved, &rejected); err != nil {
			t.Fatal(err)
		}
		if approved != 1 || rejected != 1 {
			t.Fatalf("pending actions: %d approved, %d rejected; want 1 and 1", approved, rejected)
		}
		shoot(t, writer, "console-policy-resolved.png")
	})

	t.Run("holds: set from the page", func(t *testing.T) {
		run(t, writer, "open /holds", chromedp.Navigate(e.webURL+"/holds"), chromedp.WaitVisible(chromedp.CSS("#hold-set-form")),
			chromedp.SendKeys(chromedp.CSS("#hold-device"), "gpu-a04"), chromedp.SendKeys(chromedp.CSS("#hold-reason"), "PSU swap"))
		clickNav(t, writer, "set the exclusion", "#hold-set-btn", `#holds tr[data-kind="exclusion"]`)
		shoot(t, writer, "console-holds.png")
	})

	t.Run("operations, commands, policy", func(t *testing.T) {
		run(t, writer, "open /operations", chromedp.Navigate(e.webURL+"/operations"), chromedp.WaitVisible(chromedp.CSS("#operations")),
			chromedp.Click(chromedp.CSS("#op-start summary")), chromedp.SendKeys(chromedp.CSS("#op-devices"), "gpu-a05"),
			chromedp.SendKeys(chromedp.CSS("#op-reason"), "check"))
		shoot(t, writer, "console-operations.png")
		clickNav(t, writer, "start", "#op-start-btn", "#error")
		if got := text(writer, `document.querySelector('#error').textContent`); got == "" {
			t.Error("a refused start shows no reason")
		} else {
			t.Logf("refused start shows: %s", got)
		}
		shoot(t, writer, "console-operation-refused.png")
		run(t, writer, "open /commands", chromedp.Navigate(e.webURL+"/commands"), chromedp.WaitVisible(chromedp.CSS("#commands")))
		if got := text(writer, `String(document.querySelectorAll('#commands tbody tr[data-command]').length)`); got != "5" {
			t.Errorf("commands page lists %s commands, want 5 (2 quarantines, 2 releases, 1 approval)", got)
		}
		// The list is sorted by device name on the server; a click on a
		// column head sorts it by that column, again the other way.
		var col []string
		eval(t, writer, `[...document.querySelectorAll('#commands tbody tr')].map(tr => tr.cells[1].textContent.trim())`, &col)
		if !slices.IsSorted(col) {
			t.Errorf("commands by default: devices %v, want sorted by name", col)
		}
		for _, want := range []string{"action", "-action"} {
			clickNav(t, writer, "sort by action", `#commands thead th[data-sort=action] a`, "#commands")
			eval(t, writer, `[...document.querySelectorAll('#commands tbody tr')].map(tr => tr.cells[3].textContent.trim().split(' ')[0])`, &col)
			sorted := slices.IsSorted(col)
			if want == "-action" {
				sorted = slices.IsSorted(reversedStrings(col))
			}
			if got := text(writer, `new URLSearchParams(location.search).get('sort')`); !sorted || got != want {
				t.Errorf("commands sorted by %s (?sort=%s): %v", want, got, col)
			}
		}
		if got := text(writer, `String(document.querySelectorAll('#commands tbody tr[data-command]').length)`); got != "5" {
			t.Errorf("sorted by action the commands page lists %s commands, want 5", got)
		}
		run(t, writer, "a selector", chromedp.Navigate(e.webURL+"/commands"), chromedp.WaitVisible(chromedp.CSS("#selector")),
			chromedp.SendKeys(chromedp.CSS("#selector"), "site=alpha,name=gpu-a05"))
		clickNav(t, writer, "apply the selector", `#cmd-filters button[type=submit]`, "#commands")
		eval(t, writer, `[...document.querySelectorAll('#commands tbody tr[data-command]')].map(tr => tr.cells[1].textContent.trim())`, &col)
		if len(col) != 2 || col[0] != "gpu-a05" || col[1] != "gpu-a05" {
			t.Errorf("commands of selector name=gpu-a05: %v, want its quarantine and release", col)
		}
		shoot(t, writer, "console-commands.png")
		run(t, writer, "open /policy", chromedp.Navigate(e.webURL+"/policy"), chromedp.WaitVisible(chromedp.CSS("#policy-states")))
		shoot(t, writer, "console-policy.png")
	})

	t.Run("the names operators try first", func(t *testing.T) {
		for path, want := range map[string]string{"/decisions": "/policy", "/pending": "/policy", "/sites": "/"} {
			run(t, writer, "open "+path, chromedp.Navigate(e.webURL+path), chromedp.WaitVisible(chromedp.CSS("#live")))
			if got := text(writer, `location.pathname`); got != want {
				t.Errorf("%s lands on %s, want %s", path, got, want)
			}
		}
	})

	t.Run("read-only identity sees why", func(t *testing.T) {
		reader := newTab("ops-read")
		for _, p := range []string{"/operations", "/policy", "/holds"} {
			run(t, reader, "open "+p, chromedp.Navigate(e.webURL+p), chromedp.WaitVisible(chromedp.CSS("#live")))
			if p != "/policy" || text(reader, `document.querySelector('#no-pending') ? 'none' : ''`) == "" {
				if got := text(reader, `(document.querySelector('#read-only-note') || {textContent: ''}).textContent`); !strings.Contains(got, "lacks operations:write") {
					t.Errorf("%s for a reader: note %q", p, got)
				}
			}
		}
		var code int
		eval(t, reader, `fetch('/holds', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'},
			body: 'device=gpu-a04&kind=exclusion&reason=x'}).then(r => r.status)`, &code)
		if code != 403 {
			t.Errorf("reader's hold POST: %d, want 403", code)
		}
		shoot(t, reader, "console-holds-read-only.png")
	})

	t.Run("device page: exclusion and planned maintenance set and cleared", func(t *testing.T) {
		path := e.webURL + "/devices/alpha/gpu-a06"
		run(t, writer, "open gpu-a06", chromedp.Navigate(path), chromedp.WaitVisible(chromedp.CSS("#device-hold-form")),
			chromedp.SetValue(chromedp.CSS(`#device-hold-form select[name=kind]`), "exclusion"),
			chromedp.SendKeys(chromedp.CSS(`#device-hold-form input[name=reason]`), "burn-in by hand"))
		clickNav(t, writer, "set the exclusion", `#device-hold-form button[type=submit]`, `#holds tr[data-kind="exclusion"]`)
		// Planned maintenance needs an end: refused with the API's message, nothing set.
		run(t, writer, "maintenance without an end", chromedp.SetValue(chromedp.CSS(`#device-hold-form select[name=kind]`), "maintenance"),
			chromedp.SendKeys(chromedp.CSS(`#device-hold-form input[name=reason]`), "PSU swap"))
		clickNav(t, writer, "set maintenance without an end", `#device-hold-form button[type=submit]`, "#error")
		if got := text(writer, `document.querySelector('#error').textContent`); !strings.Contains(got, "end") {
			t.Errorf("maintenance without an end shows %q", got)
		} else {
			t.Logf("maintenance without an end: %s", got)
		}
		run(t, writer, "maintenance for 4h", chromedp.Navigate(path), chromedp.WaitVisible(chromedp.CSS("#device-hold-form")),
			chromedp.SetValue(chromedp.CSS(`#device-hold-form select[name=kind]`), "maintenance"),
			chromedp.SendKeys(chromedp.CSS(`#device-hold-form input[name=reason]`), "PSU swap"),
			chromedp.SendKeys(chromedp.CSS(`#device-hold-form input[name=end]`), "4h"))
		clickNav(t, writer, "set maintenance", `#device-hold-form button[type=submit]`, `#holds tr[data-kind="maintenance"]`)
		if got := text(writer, `location.pathname`); !strings.HasPrefix(got, "/devices/") {
			t.Errorf("setting a hold on the device page lands on %s, not the device page", got)
		}
		if got := text(writer, `document.querySelector('#holds tr[data-kind="maintenance"]').textContent`); !strings.Contains(got, "PSU swap") || !strings.Contains(got, "ops-write") {
			t.Errorf("the maintenance hold row: %q", got)
		}
		shoot(t, writer, "console-device-holds-set.png")
		clickNav(t, writer, "clear the maintenance", `#holds tr[data-kind="maintenance"] .clear-hold`, "#device-hold-form")
		if got := text(writer, `document.querySelectorAll('#holds tr[data-kind="maintenance"]').length + ' ' + document.querySelectorAll('#holds tr[data-kind="exclusion"]').length`); got != "0 1" {
			t.Errorf("after clearing the maintenance, maintenance and exclusion rows: %s, want 0 1", got)
		}
		shoot(t, writer, "console-device-holds-cleared.png")
	})

	t.Run("release every hold from the device page", func(t *testing.T) {
		// The approved pending action quarantined its device with the
		// policy's hold; an operator quarantines it too.
		var dev string
		if err := e.st.Pool().QueryRow(ctx, `SELECT device_id::text FROM quarantine_holds WHERE holder LIKE 'policy:%' LIMIT 1`).Scan(&dev); err != nil {
			t.Fatalf("the policy's hold: %v", err)
		}
		run(t, writer, "open it", chromedp.Navigate(e.webURL+"/devices/"+dev), chromedp.WaitVisible(chromedp.CSS("#quarantine-btn")),
			chromedp.SendKeys(chromedp.CSS("#reason"), "operator hold too"), chromedp.Click(chromedp.CSS("#quarantine-btn")),
			chromedp.WaitVisible(chromedp.CSS("#command")))
		run(t, writer, "reload", chromedp.Navigate(e.webURL+"/devices/"+dev), chromedp.WaitVisible(chromedp.CSS("#release-plan")))
		if got := text(writer, `document.querySelectorAll('#holds tr[data-kind="quarantine"]').length + ' ' + document.querySelector('#release-plan').textContent`); !strings.HasPrefix(got, "2 ") || !strings.Contains(got, "policy:") {
			t.Errorf("two holds and a plan naming the policy's as remaining: %q", got)
		}
		shoot(t, writer, "console-device-two-holds.png")
		run(t, writer, "release every hold", chromedp.SendKeys(chromedp.CSS("#reason"), "both checked"), chromedp.Click(chromedp.CSS("#all-holds")),
			chromedp.Click(chromedp.CSS("#release-btn")), chromedp.WaitVisible(chromedp.CSS("#command")))
		var holds int
		var desired string
		if err := e.st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM quarantine_holds WHERE device_id = $1), desired_impairment FROM devices WHERE id = $1`, dev).Scan(&holds, &desired); err != nil {
			t.Fatal(err)
		}
		if holds != 0 || desired != "RELEASED" {
			t.Errorf("after releasing every hold: %d holds, desired %s; want 0, RELEASED", holds, desired)
		}
		run(t, writer, "reload", chromedp.Navigate(e.webURL+"/devices/"+dev), chromedp.WaitVisible(chromedp.CSS("#device-holds")))
		shoot(t, writer, "console-device-every-hold-released.png")
	})

	t.Run("phone width", func(t *testing.T) {
		phone := newTab("ops-write")
		run(t, phone, "390 px", chromedp.EmulateViewport(390, 844), chromedp.Navigate(e.webURL+"/devices"), chromedp.WaitVisible(chromedp.CSS("#devices")))
		var overflow bool
		eval(t, phone, `document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow)
		if overflow {
			t.Error("the device list scrolls sideways at 390 px (tables should scroll inside their box)")
		}
		shoot(t, phone, "console-phone-devices.png")
		// Every page at phone width.
		for name, path := range map[string]string{"fleet": "/", "device": "/devices/gpu-a01", "site": "/sites/alpha", "operations": "/operations",
			"commands": "/commands", "policy": "/policy", "holds": "/holds", "events": "/events?since=3h",
			"command": "/commands/" + anyID(t, e, "commands"), "operation": "/operations/" + anyID(t, e, "operations")} {
			run(t, phone, "open "+path, chromedp.Navigate(e.webURL+path), chromedp.WaitVisible(chromedp.CSS("main h1")))
			var failed bool
			if eval(t, phone, `!!document.querySelector('#error')`, &failed); failed {
				t.Errorf("%s at 390 px is an error page", path)
			}
			eval(t, phone, `document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow)
			if overflow {
				t.Errorf("%s scrolls sideways at 390 px", path)
			}
			shoot(t, phone, "console-phone-"+name+".png")
		}
		// The bulk preview of a selector, at phone width.
		run(t, phone, "selector", chromedp.Navigate(e.webURL+"/devices"), chromedp.WaitVisible(chromedp.CSS("#selector")),
			chromedp.SendKeys(chromedp.CSS("#selector"), "site=alpha,status=faulted"))
		clickNav(t, phone, "apply", `#filters button[type=submit]`, "#sel-quarantine")
		clickNav(t, phone, "quarantine all", "#sel-quarantine", "#bulk-confirm")
		eval(t, phone, `document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow)
		if overflow {
			t.Error("the bulk preview scrolls sideways at 390 px")
		}
		shoot(t, phone, "console-phone-bulk-preview.png")
	})
}

// anyID is the id of one row of table (commands or operations), the newest.
func anyID(t *testing.T, e *hubEnv, table string) string {
	t.Helper()
	var id string
	if err := e.st.Pool().QueryRow(context.Background(), `SELECT id::text FROM `+table+` ORDER BY created_at DESC LIMIT 1`).Scan(&id); err != nil {
		t.Fatalf("a row of %s: %v", table, err)
	}
	return id
}

func reversedStrings(s []string) []string {
	c := slices.Clone(s)
	slices.Reverse(c)
	return c
}

package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ironlink/ironlink/hub/web/webtest"
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
		if got := text(writer, `String(document.querySelectorAll('#commands tbody tr[data-command]').length)`); got != "2" {
			t.Errorf("commands page lists %s commands, want 2", got)
		}
		shoot(t, writer, "console-commands.png")
		run(t, writer, "open /policy", chromedp.Navigate(e.webURL+"/policy"), chromedp.WaitVisible(chromedp.CSS("#policy-states")))
		shoot(t, writer, "console-policy.png")
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

	t.Run("phone width", func(t *testing.T) {
		phone := newTab("ops-write")
		run(t, phone, "390 px", chromedp.EmulateViewport(390, 844), chromedp.Navigate(e.webURL+"/devices"), chromedp.WaitVisible(chromedp.CSS("#devices")))
		var overflow bool
		eval(t, phone, `document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow)
		if overflow {
			t.Error("the device list scrolls sideways at 390 px (tables should scroll inside their box)")
		}
		shoot(t, phone, "console-phone-devices.png")
		run(t, phone, "device", chromedp.Navigate(e.webURL+"/devices/gpu-a01"), chromedp.WaitVisible(chromedp.CSS("#device-holds")))
		shoot(t, phone, "console-phone-device.png")
		run(t, phone, "policy", chromedp.Navigate(e.webURL+"/policy"), chromedp.WaitVisible(chromedp.CSS("#policy-states")))
		shoot(t, phone, "console-phone-policy.png")
	})
}

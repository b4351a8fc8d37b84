package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/web/webtest"
	"github.com/ironlink/ironlink/test/harness"
)

// TestEveryPageInChromium drives the pages that make every operator RPC
// reachable from the view (web.Inventory) in Chromium against a real hub
// and PostgreSQL: the events of one device (WatchFleet) after a
// quarantine made on its page, a 1,024-byte reason clipped in the
// device's header and expanded by a click, a repair handoff closed from
// /handoffs, a policy replay from the policy page, validation runs and
// hardware history, an operation page that follows its operation
// (WatchOperation) to CANCELLED without a reload, the device page's
// Offer, Release and node action, Retry of a FAILED command from
// /commands, a hold set and cleared on /holds, and every one of these
// pages at phone width (390 px) without sideways scrolling. Every page is
// screenshotted.
func TestEveryPageInChromium(t *testing.T) {
	newTab := browser(t)
	e := startHub(t)
	ctx := context.Background()
	for site, devs := range seeded {
		if _, err := webtest.SeedSiteAt(ctx, e.st, site, time.Now().Add(-3*time.Hour), devs); err != nil {
			t.Fatal(err)
		}
	}
	idOf := func(name string) string {
		t.Helper()
		var id string
		if err := e.st.Pool().QueryRow(ctx, `SELECT id::text FROM devices WHERE name = $1`, name).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	writer := newTab("ops-write")
	text := func(tab context.Context, js string) string {
		t.Helper()
		var s string
		eval(t, tab, js, &s)
		return s
	}
	post := func(tab context.Context, path, body string) int {
		t.Helper()
		var code int
		eval(t, tab, `fetch('`+path+`', {method: 'POST', redirect: 'manual', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: '`+body+`'}).then(r => r.status)`, &code)
		return code
	}

	t.Run("events of one device after a quarantine from its page", func(t *testing.T) {
		run(t, writer, "open gpu-a05", chromedp.Navigate(e.webURL+"/devices/alpha/gpu-a05"), chromedp.WaitVisible(chromedp.CSS("#reason")),
			chromedp.SendKeys(chromedp.CSS("#reason"), "fan noise"), chromedp.Click(chromedp.CSS("#quarantine-btn")),
			chromedp.WaitVisible(chromedp.CSS("#command")))
		began := time.Now()
		clickNav(t, writer, "events link", `#device-links a[href^="/events"]`, "#events")
		t.Logf("the events page of gpu-a05 took %s", time.Since(began).Round(time.Millisecond))
		var rows []string
		eval(t, writer, `[...document.querySelectorAll('#events tbody tr[data-kind]')].map(r => r.dataset.kind + ': ' + r.cells[2].textContent + ': ' + r.cells[4].textContent)`, &rows)
		joined := strings.Join(rows, "\n")
		if !strings.Contains(joined, "command state: gpu-a05: quarantine") || !strings.Contains(joined, "fan noise") {
			t.Errorf("events of gpu-a05:\n%s", joined)
		}
		for _, r := range rows {
			if !strings.Contains(r, "gpu-a05") {
				t.Errorf("events of gpu-a05 lists another device: %s", r)
			}
		}
		shoot(t, writer, "every-events-device.png")
		run(t, writer, "events of site beta", chromedp.Navigate(e.webURL+"/events?site=beta&since=1h"), chromedp.WaitVisible(chromedp.CSS("#events")))
		var sites []string
		eval(t, writer, `[...document.querySelectorAll('#events tbody tr[data-kind]')].map(r => r.cells[3].textContent)`, &sites)
		if len(sites) == 0 {
			t.Error("/events?site=beta lists nothing (beta's devices were seeded within the hour)")
		}
		for _, s := range sites {
			if s != "beta" {
				t.Errorf("/events?site=beta lists a change of site %q", s)
			}
		}
	})

	t.Run("a 1,024-byte reason is clipped and expands", func(t *testing.T) {
		id := idOf("gpu-a09")
		long := strings.Repeat("Xid 79 on GPU 3, fallen off the bus. ", 30)[:1024]
		run(t, writer, "open a page", chromedp.Navigate(e.webURL+"/devices/"+id), chromedp.WaitVisible(chromedp.CSS("#status")))
		if code := post(writer, "/devices/"+id+"/quarantine", "reason="+strings.ReplaceAll(long, " ", "+")); code != 0 && code != 303 {
			t.Fatalf("quarantine with a 1,024-byte reason: %d", code)
		}
		run(t, writer, "open gpu-a09", chromedp.Navigate(e.webURL+"/devices/"+id), chromedp.WaitVisible(chromedp.CSS("#status-message details.clip")))
		var h float64
		eval(t, writer, `document.querySelector('.status-line').getBoundingClientRect().height`, &h)
		if h > 120 {
			t.Errorf("the status line is %.0f px tall with a 1,024-byte reason (want at most 120)", h)
		}
		shoot(t, writer, "every-long-reason-clipped.png")
		run(t, writer, "expand", chromedp.Click(chromedp.CSS("#status-message details.clip summary")))
		var full string
		eval(t, writer, `document.querySelector('#status-message details.clip').open ? document.querySelector('#status-message details.clip .full').innerText : ''`, &full)
		if !strings.Contains(full, long[:1000]) {
			t.Errorf("expanded reason shows %d bytes, not the reason", len(full))
		}
		shoot(t, writer, "every-long-reason-expanded.png")
	})

	t.Run("a repair handoff closed from /handoffs", func(t *testing.T) {
		h, ok, err := e.st.CreateHandoff(ctx, store.NewHandoff{Device: store.RemediationDevice{DeviceID: idOf("gpu-a01"), Site: "alpha", Rule: "gpu-fatal", HoldGeneration: 1},
			Reason: store.HandoffLadderExhausted, Detail: "REBOOT and REPROVISION tried, the device is still faulted"})
		if err != nil || !ok {
			t.Fatalf("create handoff: %v %v", ok, err)
		}
		row := fmt.Sprintf(`#handoffs tr[data-id="%d"]`, h.ID)
		run(t, writer, "open /handoffs", chromedp.Navigate(e.webURL+"/handoffs?open=1"), chromedp.WaitVisible(chromedp.CSS(row)))
		if got := text(writer, `document.querySelector('`+row+`').textContent`); !strings.Contains(got, "gpu-a01") || !strings.Contains(got, "LadderExhausted") {
			t.Errorf("handoff row: %q", got)
		}
		shoot(t, writer, "every-handoffs-open.png")
		run(t, writer, "note", chromedp.SendKeys(chromedp.CSS(row+` input[name=note]`), "PSU and GPU 3 replaced"))
		clickNav(t, writer, "close", row+` button`, "#handoffs")
		run(t, writer, "all handoffs", chromedp.Navigate(e.webURL+"/handoffs"), chromedp.WaitVisible(chromedp.CSS(row)))
		if got := text(writer, `document.querySelector('`+row+`').dataset.state + ' ' + document.querySelector('`+row+`').textContent`); !strings.HasPrefix(got, "CLOSED") ||
			!strings.Contains(got, "by ops-write") || !strings.Contains(got, "PSU and GPU 3 replaced") {
			t.Errorf("closed handoff row: %q", got)
		}
		shoot(t, writer, "every-handoffs-closed.png")
	})

	t.Run("policy replay from the policy page", func(t *testing.T) {
		run(t, writer, "open /policy", chromedp.Navigate(e.webURL+"/policy"), chromedp.WaitVisible(chromedp.CSS("#replay-link")))
		clickNav(t, writer, "replay link", "#replay-link", "#replay-form")
		run(t, writer, "period", chromedp.SendKeys(chromedp.CSS("#replay-from"), "24h"))
		clickNav(t, writer, "replay", "#replay-btn", "#replay-summary")
		if got := text(writer, `document.querySelector('#replay-summary').textContent`); !strings.Contains(got, "decisions") || !strings.Contains(got, "differ from the recorded ones") {
			t.Errorf("replay summary %q", got)
		}
		shoot(t, writer, "every-policy-replay.png")
		run(t, writer, "a bad period", chromedp.Navigate(e.webURL+"/policy/replay?from=yesterday"), chromedp.WaitVisible(chromedp.CSS("main")))
		if got := text(writer, `document.querySelector('main').textContent`); !strings.Contains(got, `from "yesterday" is neither a time`) {
			t.Errorf("a malformed from shows %q", got)
		}
	})

	t.Run("validation runs and hardware history", func(t *testing.T) {
		run(t, writer, "open /validation", chromedp.Navigate(e.webURL+"/validation"), chromedp.WaitVisible(chromedp.CSS("#vrun-ask")))
		run(t, writer, "site alpha", chromedp.Navigate(e.webURL+"/validation?site=alpha"), chromedp.WaitVisible(chromedp.CSS("#vruns")))
		shoot(t, writer, "every-validation.png")
		run(t, writer, "hardware of gpu-a01", chromedp.Navigate(e.webURL+"/devices/alpha/gpu-a01"), chromedp.WaitVisible(chromedp.CSS("#device-links")))
		clickNav(t, writer, "hardware history link", `#device-links a[href^="/hardware"]`, "#hardware-history")
		shoot(t, writer, "every-hardware.png")
		run(t, writer, "an unknown device", chromedp.Navigate(e.webURL+"/hardware?device=alpha/nope"), chromedp.WaitVisible(chromedp.CSS("main")))
		if got := text(writer, `document.title`); !strings.HasPrefix(got, "Not Found") {
			t.Errorf("hardware of an unknown device: title %q", got)
		}
	})

	t.Run("an operation page follows its operation", func(t *testing.T) {
		if _, err := e.st.OpenLink(ctx, store.LinkHello{Site: "beta", BootID: uuid.NewString(), Replica: "elsewhere", Capabilities: []string{operations.Capability}}); err != nil {
			t.Fatal(err)
		}
		run(t, writer, "open /operations", chromedp.Navigate(e.webURL+"/operations"), chromedp.WaitVisible(chromedp.CSS("#operations")),
			chromedp.Click(chromedp.CSS("#op-start summary")), chromedp.SetValue(chromedp.CSS("#op-kind"), "POWER_ON"),
			chromedp.SendKeys(chromedp.CSS("#op-devices"), "beta/cpu-b03"), chromedp.SendKeys(chromedp.CSS("#op-reason"), "wake it"))
		clickNav(t, writer, "start", "#op-start-btn", "#op-facts")
		opPath := text(writer, `location.pathname`)
		var mark int
		eval(t, writer, `window.__noReload = 1`, &mark)
		other := newTab("ops-write")
		run(t, other, "another tab", chromedp.Navigate(e.webURL+"/operations"), chromedp.WaitVisible(chromedp.CSS("#operations")))
		if code := post(other, opPath+"/cancel", "reason=not+needed"); code != 0 && code != 303 {
			t.Fatalf("cancel from another tab: %d", code)
		}
		deadline := time.Now().Add(20 * time.Second)
		for text(writer, `document.querySelector('#op-state').textContent`) != "CANCELLED" {
			if time.Now().After(deadline) {
				t.Fatalf("the operation page still shows %q 20 s after the cancel", text(writer, `document.querySelector('#op-state').textContent`))
			}
			time.Sleep(200 * time.Millisecond)
		}
		eval(t, writer, `window.__noReload || 0`, &mark)
		if mark != 1 {
			t.Error("the operation page reloaded instead of updating its live region")
		}
		shoot(t, writer, "every-operation-followed.png")
	})

	t.Run("every device action from its page, retry and clear from theirs", func(t *testing.T) {
		count := func(q string, args ...any) int {
			t.Helper()
			var n int
			if err := e.st.Pool().QueryRow(ctx, q, args...).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		// Offer a HELD device; the site fails the command; Retry it from /commands.
		held := idOf("gpu-a11")
		run(t, writer, "open gpu-a11", chromedp.Navigate(e.webURL+"/devices/"+held), chromedp.WaitVisible(chromedp.CSS("#offer-btn")),
			chromedp.SendKeys(chromedp.CSS("#reason"), "burn-in passed"), chromedp.Click(chromedp.CSS("#offer-btn")),
			chromedp.WaitVisible(chromedp.CSS("#command")))
		var cmdID string
		var gen int64
		if err := e.st.Pool().QueryRow(ctx, `SELECT id::text, generation FROM commands WHERE device_id = $1 AND action = 'OFFER' AND actor = 'ops-write' AND reason = 'burn-in passed'`, held).Scan(&cmdID, &gen); err != nil {
			t.Fatalf("the offer from the page: %v", err)
		}
		shoot(t, writer, "every-device-offered.png")
		if _, err := e.st.RecordResult(ctx, "alpha", store.CommandResult{CommandID: cmdID, DeviceID: held, Generation: gen, Error: "trait API down",
			FailureClass: store.FailurePermanent, FailureReason: "TraitUpdateFailed"}); err != nil {
			t.Fatal(err)
		}
		run(t, writer, "failed commands", chromedp.Navigate(e.webURL+"/commands?state=FAILED"), chromedp.WaitVisible(chromedp.CSS(`#commands tr[data-command="`+cmdID+`"] .retry-btn`)))
		shoot(t, writer, "every-command-failed.png")
		clickNav(t, writer, "retry", `#commands tr[data-command="`+cmdID+`"] .retry-btn`, "#command")
		if n := count(`SELECT count(*) FROM commands WHERE device_id = $1 AND action = 'OFFER'`, held); n != 2 {
			t.Errorf("after Retry gpu-a11 has %d offer commands, want 2", n)
		}

		// Release the device quarantined by the first subtest, from its page.
		avail := idOf("gpu-a05")
		run(t, writer, "open gpu-a05", chromedp.Navigate(e.webURL+"/devices/"+avail), chromedp.WaitVisible(chromedp.CSS("#release-btn")),
			chromedp.SendKeys(chromedp.CSS("#reason"), "fan replaced"), chromedp.Click(chromedp.CSS("#release-btn")),
			chromedp.WaitVisible(chromedp.CSS(`#command`)))
		harness.Eventually(t, 10*time.Second, func() error {
			if n := count(`SELECT count(*) FROM devices WHERE id = $1 AND desired_impairment = 'RELEASED'`, avail); n != 1 {
				return fmt.Errorf("gpu-a05 is not released after Release on its page")
			}
			return nil
		})
		shoot(t, writer, "every-device-released.png")

		// A node action on beta/cpu-b03 (beta offers operations since the last subtest).
		run(t, writer, "open cpu-b03", chromedp.Navigate(e.webURL+"/devices/beta/cpu-b03"), chromedp.WaitVisible(chromedp.CSS("#node-action-form")),
			chromedp.SetValue(chromedp.CSS("#node-action"), "power-off"), chromedp.SendKeys(chromedp.CSS(`#node-action-form input[name=reason]`), "move to rack 9"))
		clickNav(t, writer, "start the node action", "#node-action-btn", `#device-operations tbody tr[data-state]`)
		if got := text(writer, `document.querySelector('#device-operations tbody tr[data-state]').textContent`); !strings.Contains(got, "POWER_OFF") || !strings.Contains(got, "move to rack 9") {
			t.Errorf("the device's operations after power off: %q", got)
		}
		shoot(t, writer, "every-device-node-action.png")

		// A hold set and cleared on /holds.
		run(t, writer, "open /holds", chromedp.Navigate(e.webURL+"/holds"), chromedp.WaitVisible(chromedp.CSS("#hold-set-form")),
			chromedp.SendKeys(chromedp.CSS("#hold-device"), "alpha/gpu-a04"), chromedp.SendKeys(chromedp.CSS("#hold-reason"), "burn-in"))
		row := `#holds tr[data-device="` + idOf("gpu-a04") + `"][data-kind="exclusion"]`
		clickNav(t, writer, "set", "#hold-set-btn", row)
		clickNav(t, writer, "clear", row+" .clear-hold", "#holds")
		if n := text(writer, `String(document.querySelectorAll('`+row+`').length)`); n != "0" {
			t.Errorf("the exclusion is still listed after Clear")
		}
		shoot(t, writer, "every-holds-cleared.png")
	})

	t.Run("phone width", func(t *testing.T) {
		phone := newTab("ops-write")
		run(t, phone, "390 px", chromedp.EmulateViewport(390, 844))
		for name, path := range map[string]string{"events": "/events?since=3h", "handoffs": "/handoffs", "validation": "/validation?site=alpha",
			"hardware": "/hardware?device=gpu-a01", "replay": "/policy/replay?from=24h", "drift": "/drift", "operation-list": "/operations"} {
			run(t, phone, "open "+path, chromedp.Navigate(e.webURL+path), chromedp.WaitVisible(chromedp.CSS("main h1")))
			var overflow bool
			eval(t, phone, `document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow)
			if overflow {
				t.Errorf("%s scrolls sideways at 390 px", path)
			}
			shoot(t, phone, "every-phone-"+name+".png")
		}
	})
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/ctl"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/syncbuf"
	"github.com/ironlink/ironlink/test/harness"
)

// TestConsoleCommands drives the commands that make the CLI reach every
// operator RPC (ctl.Inventory), as the binary, against a real hub,
// PostgreSQL and two satellites on the simulator: holds (list, set,
// clear), policy show|states|guard, retry of a FAILED command named by an
// id prefix, get operations, events of one device over a window, watch
// --device, get devices -o wide with HELD-BY, --as-of with a relative age
// and its ages counted from then (as describe counts them), the refusals
// of malformed or unknown id prefixes, shell completion of names and
// sites, and watch -l --since with long reasons cut to a line.
func TestConsoleCommands(t *testing.T) {
	f := newFleetWith(t, 10, fleetOptions{operations: true})
	ctx := context.Background()
	start := time.Now()

	t.Run("holds: set, list, clear", func(t *testing.T) {
		f.expect(f.run("holds", "set", "node-004", "--kind", "exclusion", "--reason", "burn-in by hand"), 0,
			[]string{"cli/node-004: exclusion hold set by ops-admin", "until cleared"}, nil)
		f.expect(f.run("holds", "set", "node-005", "--kind", "maintenance", "--end", "1h", "--reason", "PSU swap"), 0,
			[]string{"cli/node-005: maintenance hold set by ops-admin", "until 20"}, nil)
		f.expect(f.run("holds", "set", "node-005", "--kind", "maintenance", "--reason", "x"), ctl.ExitUsage, nil, []string{"--end is required"})
		f.expect(f.run("holds", "set", "node-005", "--kind", "forever", "--reason", "x"), ctl.ExitUsage, nil, []string{`--kind "forever"`})
		f.expect(f.run("--context", "viewer", "holds", "set", "node-006", "--kind", "exclusion", "--reason", "x"), ctl.ExitAuth, nil, []string{"operations:write"})
		r := f.run("holds")
		f.expect(r, 0, []string{"KIND", "node-004", "exclusion", "burn-in by hand", "node-005", "maintenance", "PSU swap"}, nil)
		if strings.Contains(r.stdout, "node-006") {
			t.Fatalf("holds lists a device without holds:\n%v", r)
		}
		r = f.run("holds", "--kind", "maintenance", "-o", "name")
		if r.code != 0 || strings.TrimSpace(r.stdout) != "cli/node-005" {
			t.Fatalf("holds --kind maintenance -o name: want cli/node-005\n%v", r)
		}
		f.expect(f.run("get", "devices", "node-004", "-o", "wide"), 0, []string{"HELD-BY", "exclusion (ops-admin: burn-in by hand)"}, nil)
		f.expect(f.run("describe", "device", "node-004"), 0, []string{"Policy hold:", `exclusion by ops-admin until cleared ("burn-in by hand"`,
			"Recent operations (newest first):", "Policy decisions (newest first):"}, nil)
		f.expect(f.run("holds", "clear", "node-004", "--kind", "exclusion"), 0, []string{"cli/node-004: exclusion hold cleared"}, nil)
		f.expect(f.run("holds", "clear", "node-004", "--kind", "exclusion"), ctl.ExitNotFound, nil, nil)
		f.expect(f.run("holds", "clear", "node-005", "--kind", "maintenance"), 0, nil, nil)
		r = f.run("holds")
		f.expect(r, 0, nil, []string{"No holds."})
	})

	t.Run("a quarantine hold shows who and why in holds and get devices -o wide", func(t *testing.T) {
		long := "GPU 3 throws Xid 79 " + strings.Repeat("and more detail ", 10) + "END"
		f.expect(f.run("quarantine", "node-006", "--reason", long, "--wait", "--timeout", "60s"), 0, nil, nil)
		f.expect(f.run("holds", "node-006"), 0, []string{"quarantine", "operator (ops-admin)", "GPU 3 throws"}, nil)
		// -o wide prints the whole reason, the table does not
		f.expect(f.run("get", "devices", "node-006", "-o", "wide"), 0, []string{"operator (ops-admin: " + long + ")", "END"}, nil)
		r := f.run("get", "devices", "node-006")
		if strings.Contains(r.stdout, "END") {
			t.Errorf("the default table prints the 180-character reason in full:\n%v", r)
		}
		f.expect(f.run("release", "node-006", "--reason", "GPU replaced", "--wait", "--timeout", "60s"), 0, nil, nil)
	})

	t.Run("policy show, states, guard", func(t *testing.T) {
		f.expect(f.run("policy", "show", site), 0, []string{"Site:", site, "Automatic:", "Guard:", "Rules (tried in order):"}, nil)
		f.expect(f.run("policy", "states"), 0, []string{"SITE", "AUTOMATIC", "GUARD", site, otherSite}, nil)
		f.expect(f.run("policy", "guard", site), 0, []string{"GUARD", site, "armed"}, nil)
		f.expect(f.run("policy", "show", site, "-o", "json"), 0, []string{`"policy"`, `"maxDevices"`, `"` + site + `"`}, nil)
		f.expect(f.run("policy", "states", "atlantis"), ctl.ExitNotFound, nil, nil)
	})

	t.Run("retry sends a FAILED command again, named by a prefix", func(t *testing.T) {
		f.sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceBaremetal, Method: "PUT",
			PathContains: f.nodes["node-009"] + "/traits", Status: 403, Times: -1})
		r := f.run("offer", "node-009", "--reason", "offer it", "--wait", "--timeout", "60s")
		f.expect(r, ctl.ExitCommandFailed, []string{"FAILED"}, nil)
		m := uuidRE.FindString(r.stdout)
		if m == "" {
			t.Fatalf("offer printed no command id\n%v", r)
		}
		prefix := m[:8]
		f.expect(f.run("get", "commands", prefix), 0, []string{prefix, "node-009", "offer", "FAILED"}, nil)
		f.sim.ClearFaults()
		// The hub may be resending the TRANSIENT failure right now (then the
		// command is SENT and a retry is refused, changing nothing): retry
		// until it is taken.
		resent := false
		harness.Eventually(t, 60*time.Second, func() error {
			r = f.run("retry", prefix, "--reason", "BMC fixed", "--wait", "--timeout", "60s")
			if r.code == 0 {
				return nil
			}
			if r.code != ctl.ExitRefused {
				t.Fatalf("retry: %v", r)
			}
			g, err := f.api.GetCommand(ctx, &ironlinkv1.GetCommandRequest{CommandId: m})
			if err == nil && g.GetCommand().GetState() == ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED {
				resent = true // the hub's own resend succeeded first
				return nil
			}
			return fmt.Errorf("%v", r)
		})
		if !resent {
			f.expect(r, 0, []string{"cli/node-009: offer retried as command", "cli/node-009: SUCCEEDED"}, nil)
			f.expect(f.run("describe", "device", "node-009"), 0, []string{"retry of command " + m}, nil)
		}
		f.expect(f.run("retry", prefix, "--reason", "again"), ctl.ExitRefused, nil, nil)
	})

	t.Run("ids: malformed or unknown prefixes are refused", func(t *testing.T) {
		f.expect(f.run("get", "commands", "zz"), ctl.ExitUsage, nil, []string{`command id "zz" is not a UUID nor a prefix of one`})
		f.expect(f.run("op", "get", "abc"), ctl.ExitUsage, nil, []string{`operation id "abc" is not a UUID nor a prefix of one`})
		f.expect(f.run("op", "get", "0000ffff"), ctl.ExitNotFound, nil, []string{`no operation id starts with "0000ffff"`})
		f.expect(f.run("retry", "0000ffff"), ctl.ExitNotFound, nil, []string{`no command id starts with "0000ffff"`})
	})

	t.Run("get operations", func(t *testing.T) {
		f.expect(f.run("get", "operations", "--site", site), 0, nil, []string{"No operations found."})
		f.expect(f.run("get", "operations", "--state", "bogus"), ctl.ExitUsage, nil, []string{`--state "bogus"`})
		f.expect(f.run("get", "operations", "-o", "json"), 0, []string{"{"}, nil)
	})

	t.Run("events of one device over a window, watch --device", func(t *testing.T) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var out, errb syncbuf.Buffer
		done := make(chan int)
		go func() {
			done <- f.inProcessTo(wctx, &out, &errb, func(time.Time) string { return "<age>" }, "watch", "--device", "node-007")
		}()
		harness.Eventually(t, 30*time.Second, func() error {
			if !strings.Contains(errb.String(), "watching for changes") {
				return fmt.Errorf("watch has not said it is watching: %q", errb.String())
			}
			return nil
		})
		f.expect(f.run("quarantine", "node-010", "--reason", "not followed", "--wait", "--timeout", "60s"), 0, nil, nil)
		f.expect(f.run("quarantine", "node-007", "--reason", "followed", "--wait", "--timeout", "60s"), 0, nil, nil)
		harness.Eventually(t, 20*time.Second, func() error {
			if !strings.Contains(out.String(), "command  cli/node-007  quarantine") || !strings.Contains(out.String(), "SENT -> SUCCEEDED") {
				return fmt.Errorf("watch --device printed:\n%s%s", out.String(), errb.String())
			}
			return nil
		})
		cancel()
		if code := <-done; code != 0 || strings.Contains(out.String(), "node-010") {
			t.Fatalf("watch --device node-007 exited %d, printed:\n%s%s", code, out.String(), errb.String())
		}

		since := time.Since(start) + time.Minute
		r := f.run("events", "node-007", "--since", since.Round(time.Second).String())
		f.expect(r, 0, []string{"command  cli/node-007  quarantine", "SENT -> SUCCEEDED", "status   cli/node-007"}, []string{"end of the changes"})
		if strings.Contains(r.stdout, "node-010") || strings.Contains(r.stdout, "node-006") {
			t.Fatalf("events node-007 printed other devices:\n%v", r)
		}
		// the same by selector
		r = f.run("events", "-l", "site="+site+",name=node-007", "--since", since.Round(time.Second).String(), "--kind", "command")
		f.expect(r, 0, []string{"command  cli/node-007  quarantine", "SENT -> SUCCEEDED"}, nil)
		if strings.Contains(r.stdout, "status   ") || strings.Contains(r.stdout, "node-010") {
			t.Fatalf("events -l name=node-007 --kind command printed more:\n%v", r)
		}
		f.expect(f.run("events", "node-007", "-l", "site="+site), ctl.ExitUsage, nil, []string{"not both"})
		// a window that ended before the quarantine holds none of it
		r = f.run("events", "node-007", "--since", since.Round(time.Second).String(), "--until", time.Since(start).Round(time.Second).String())
		if r.code != 0 || strings.Contains(r.stdout, "quarantine") {
			t.Fatalf("events --until before the quarantine:\n%v", r)
		}
		f.expect(f.run("events", "node-007", "--since", "later"), ctl.ExitUsage, nil, []string{`--since "later"`})
		f.expect(f.run("release", "node-007", "node-010", "--reason", "done", "--wait", "--timeout", "60s"), 0, nil, nil)
	})

	t.Run("--as-of with a relative age lists the fleet as it was", func(t *testing.T) {
		// 2 s ago the fleet must have been there: run alone, this
		// subtest came sooner than that after the fleet's first batch.
		if d := 5*time.Second - time.Since(start); d > 0 {
			time.Sleep(d)
		}
		f.expect(f.run("get", "devices", "--site", site, "--as-of", "2s"), 0, []string{"node-001", "AGE"}, nil)
		f.expect(f.run("get", "devices", "--as-of", "soon"), ctl.ExitUsage, nil, []string{`--as-of "soon"`})
	})

	t.Run("--as-of: the list's ages count from then, as describe's do", func(t *testing.T) {
		// An instant halfway through this test: node-001 (AVAILABLE since
		// the fleet came up, untouched since) had its status for half as long.
		elapsed := time.Since(start)
		if elapsed < 20*time.Second {
			time.Sleep(20*time.Second - elapsed)
			elapsed = time.Since(start)
		}
		at := start.Add(elapsed / 2).UTC().Truncate(time.Second).Format(time.RFC3339)
		ageOf := func(r result) string {
			t.Helper()
			for _, l := range strings.Split(r.stdout, "\n") {
				if fs := strings.Fields(l); len(fs) > 2 && fs[0] == "node-001" && fs[1] == site {
					return fs[len(fs)-1]
				}
			}
			t.Fatalf("no row of %s/node-001:\n%v", site, r)
			return ""
		}
		then := ageOf(f.run("get", "devices", "--site", site, "--as-of", at))
		now := ageOf(f.run("get", "devices", "--site", site))
		m := regexp.MustCompile(`(?m)^Status: +AVAILABLE for (\S+)`).FindStringSubmatch(f.run("describe", "device", site+"/node-001", "--as-of", at).stdout)
		if m == nil {
			t.Fatalf("describe device --as-of %s shows no AVAILABLE status line", at)
		}
		if then != m[1] || then == now {
			t.Errorf("as of %s node-001's age is %s in the list and %s in describe (now: %s); want the list to count from then, as describe does", at, then, m[1], now)
		}
	})

	t.Run("shell completion completes names and sites from the hub", func(t *testing.T) {
		r := f.run("__complete", "describe", "device", "node-01")
		if r.code != 0 || !strings.Contains(r.stdout, "node-010\t"+site+" ") || strings.Contains(r.stdout, "node-009") {
			t.Errorf("completion of node-01:\n%v", r)
		}
		r = f.run("__complete", "describe", "device", otherSite+"/node-00")
		if r.code != 0 || !strings.Contains(r.stdout, otherSite+"/node-001\t") || strings.Contains(r.stdout, site+"/node-00") {
			t.Errorf("completion of %s/node-00:\n%v", otherSite, r)
		}
		r = f.run("__complete", "get", "devices", "--site", "cli-")
		if r.code != 0 || !strings.Contains(r.stdout, otherSite+"\n") || strings.Contains(r.stdout, site+"\n") {
			t.Errorf("completion of --site cli-:\n%v", r)
		}
		f.expect(f.run("completion", "bash"), 0, []string{"__start_ironlink"}, nil)
	})

	t.Run("watch -l --since replays a selector's window, reasons cut to a line", func(t *testing.T) {
		// node-006 was quarantined (a 180-byte reason ending in END) and
		// released by the second subtest.
		since := (time.Since(start) + time.Minute).Round(time.Second).String()
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var out, errb syncbuf.Buffer
		done := make(chan int)
		go func() {
			done <- f.inProcessTo(wctx, &out, &errb, func(time.Time) string { return "<age>" }, "watch", "-l", "site="+site+",name=node-006", "--since", since)
		}()
		harness.Eventually(t, 30*time.Second, func() error {
			if o := out.String(); !strings.Contains(o, "command  cli/node-006  quarantine") || !strings.Contains(o, "command  cli/node-006  release") {
				return fmt.Errorf("watch -l --since printed:\n%s%s", o, errb.String())
			}
			return nil
		})
		cancel()
		o := out.String()
		if code := <-done; code != 0 || strings.Contains(o, "node-007") || !strings.Contains(o, "GPU 3 throws Xid 79") || strings.Contains(o, "detail END") {
			t.Fatalf("watch -l name=node-006 --since %s exited %d; want node-006's lines only, its 180-byte reason cut:\n%s%s", since, code, o, errb.String())
		}
		f.expect(f.run("events", "node-006", "--since", since, "-o", "wide"), 0, []string{"GPU 3 throws Xid 79", "detail END"}, nil)
	})

	t.Run("devices named by an id prefix; get operations with a real operation", func(t *testing.T) {
		id := f.nodes["node-008"]
		p6, p8 := id[:6], id[:8]
		f.expect(f.run("describe", "device", p8), 0, []string{"Name:               node-008", id}, nil)
		f.expect(f.run("describe", "device", site+"/"+strings.ToUpper(p6)), 0, []string{"Name:               node-008"}, nil)
		f.expect(f.run("describe", "device", id[:13]), 0, []string{"Name:               node-008"}, nil) // with its hyphen
		f.expect(f.run("describe", "device", otherSite+"/"+p8), ctl.ExitNotFound, nil, []string{`no device at site ` + otherSite + ` is named "` + p8 + `" or has an id starting with it`})
		f.expect(f.run("quarantine", p6, "--reason", "by prefix", "--wait", "--timeout", "60s"), 0, []string{"cli/node-008", "SUCCEEDED"}, nil)
		f.expect(f.run("holds", p8), 0, []string{"node-008", "by prefix"}, nil)
		f.expect(f.run("events", p8, "--since", "10m", "--kind", "command"), 0, []string{"command  cli/node-008  quarantine"}, nil)
		f.expect(f.run("get", "commands", "--device", p8), 0, []string{"node-008", "quarantine", "SUCCEEDED"}, nil)
		f.expect(f.run("release", site+"/"+p6, "--reason", "by prefix", "--wait", "--timeout", "60s"), 0, []string{"cli/node-008", "SUCCEEDED"}, nil)

		// an operation started by the prefix, then listed with filters
		r := f.run("op", "start", "hardware-reread", p8, "--reason", "DIMM swapped", "--wait", "--timeout", "60s")
		f.expect(r, 0, []string{"SUCCEEDED"}, nil)
		opID := uuidRE.FindString(r.stdout + r.stderr)
		if opID == "" {
			t.Fatalf("op start printed no operation id\n%v", r)
		}
		r = f.run("get", "operations", "--device", p6, "-o", "wide")
		f.expect(r, 0, []string{opID[:8], "hardware-reread", "SUCCEEDED", "node-008", "DIMM swapped"}, nil)
		f.expect(f.run("get", "operations", "--kind", "hardware-reread", "--state", "succeeded", "--site", site), 0, []string{opID[:8], "node-008"}, nil)
		f.expect(f.run("get", "operations", "--state", "failed,cancelled"), 0, nil, []string{"No operations found."})
		f.expect(f.run("op", "get", opID[:8]), 0, []string{opID, "SUCCEEDED"}, nil)

		// two devices whose ids share a prefix: the prefix is refused, listing both
		for _, u := range []string{"feedface-000a-4000-8000-000000000000", "feedface-000b-4000-8000-000000000000"} {
			f.sim.AddNode(openstacksim.Node{UUID: u, Name: "twin-" + u[12:13], ProvisionState: "available"})
		}
		harness.Eventually(t, 30*time.Second, func() error {
			_, err := f.api.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: "feedface-000b-4000-8000-000000000000"})
			return err
		})
		f.expect(f.run("describe", "device", "feedface"), ctl.ExitUsage, nil, []string{`device id prefix "feedface" is ambiguous`,
			site + "/feedface-000a-4000-8000-000000000000", site + "/feedface-000b-4000-8000-000000000000"})
		f.expect(f.run("quarantine", "feedface-000", "--reason", "x"), ctl.ExitUsage, nil, []string{"ambiguous"})
		f.expect(f.run("describe", "device", "feedface-000a"), 0, []string{"Name:               twin-a"}, nil)
		// a device named like a prefix is the device of that name
		f.sim.AddNode(openstacksim.Node{Name: "feedface", ProvisionState: "available"})
		harness.Eventually(t, 30*time.Second, func() error {
			_, err := f.api.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceName: "feedface"})
			return err
		})
		f.expect(f.run("describe", "device", "feedface"), 0, []string{"Name:               feedface"}, nil)
		// a UUID-shaped name ("feedface-000a", which only a UUID can name)
		// that is also the start of twin-a's id: refused, acting on neither
		f.sim.AddNode(openstacksim.Node{Name: "feedface-000a", ProvisionState: "available"})
		harness.Eventually(t, 30*time.Second, func() error {
			r, err := f.api.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{NamePattern: "feedface-000a"})
			if err == nil && len(r.GetDevices()) == 0 {
				err = errors.New("no device feedface-000a yet")
			}
			return err
		})
		f.expect(f.run("quarantine", "feedface-000a", "--reason", "x"), ctl.ExitUsage, nil, []string{`"feedface-000a" is the name of device ` + site + "/", "by its UUID"})
		if cs, err := f.api.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{DeviceId: "feedface-000a-4000-8000-000000000000"}); err != nil || len(cs.GetCommands()) != 0 {
			t.Errorf("twin-a has commands after the refused quarantine: %v %v", cs.GetCommands(), err)
		}
		// a malformed full UUID is still refused, not taken for a prefix
		f.expect(f.run("describe", "device", "feedface-0000-4000-8000-0000000000"), ctl.ExitUsage, nil, []string{"not a UUID"})
	})
}

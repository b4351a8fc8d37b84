package ctl_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/ctl"
)

// TestOpNodeActions: the node actions are `op start` kinds with their own
// flags (--soft, --power-timeout, --maintenance-reason defaulting to
// --reason), shown by their CLI names; a flag of another kind is a usage
// error, and the hub's precondition refusal is exit 4 with its reason.
func TestOpNodeActions(t *testing.T) {
	addr, _ := opsHub(t)
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	run := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := ctl.Execute(context.Background(), ctl.Options{Stdout: &out, Stderr: &errb, PollInterval: 20 * time.Millisecond,
			Getenv: func(k string) string {
				if k == ctl.EnvConfig {
					return cfgPath
				}
				return ""
			}}, append([]string{"--hub", addr, "--plaintext", "--no-auth"}, args...))
		return out.String(), errb.String(), code
	}
	for _, c := range []struct{ args, want string }{
		{"power-on node-1 --soft", "--soft is for power-off and reboot only"},
		{"maintenance-clear node-1 --power-timeout 30", "--power-timeout is for power-on, power-off and reboot only"},
		{"reboot node-1 --maintenance-reason x", "--maintenance-reason is for maintenance-set only"},
	} {
		if _, errs, code := run(append(append([]string{"op", "start"}, strings.Fields(c.args)...), "--reason", "x")...); code != ctl.ExitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d %s, want usage error %q", c.args, code, errs, c.want)
		}
	}
	if _, errs, code := run("op", "start", "undeploy", "node-1", "--reason", "x"); code != ctl.ExitRefused || !strings.Contains(errs, "UNDEPLOY starts from active, available, deploy failed") {
		t.Fatalf("undeploy of a manageable node: exit %d %s", code, errs)
	}
	out, errs, code := run("op", "start", "maintenance-set", "node-1", "--reason", "DIMM swap, ticket 4711")
	if code != 0 || !strings.Contains(out, "maintenance-set") {
		t.Fatalf("maintenance-set: exit %d\n%s%s", code, out, errs)
	}
	id := strings.Fields(strings.Split(out, "\n")[1])[0]
	if out, _, code := run("op", "get", id, "-o", "json"); code != 0 || !strings.Contains(squeeze(out), `"maintenanceReason": "DIMM swap, ticket 4711"`) {
		t.Fatalf("get: exit %d\n%s", code, out)
	}
	if _, errs, code := run("op", "cancel", id, "--reason", "next"); code != 0 {
		t.Fatalf("cancel: exit %d %s", code, errs)
	}
	out, errs, code = run("op", "start", "reboot", "node-1", "--soft", "--power-timeout", "90", "--reason", "hung GPU")
	if code != 0 || !strings.Contains(out, "reboot") {
		t.Fatalf("reboot: exit %d\n%s%s", code, out, errs)
	}
	id = strings.Fields(strings.Split(out, "\n")[1])[0]
	if out, _, code := run("op", "get", id, "-o", "json"); code != 0 || !strings.Contains(squeeze(out), `"soft": true`) || !strings.Contains(squeeze(out), `"powerTimeoutSeconds": 90`) {
		t.Fatalf("get reboot: exit %d\n%s", code, out)
	}
}

// squeeze turns every run of white space into one space (protojson varies
// its spacing on purpose).
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }

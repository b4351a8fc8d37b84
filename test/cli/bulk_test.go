package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/ctl"
	"github.com/ironlink/ironlink/internal/syncbuf"
)

// withStdin runs the cobra root in this process with stdin answering the
// confirmation prompt.
func (f *fleet) withStdin(stdin string, args ...string) result {
	var out, errb syncbuf.Buffer
	env := map[string]string{"IRONLINK_CONFIG": f.config}
	code := ctl.Execute(context.Background(), ctl.Options{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(stdin),
		Getenv: func(k string) string { return env[k] }, PollInterval: 200 * time.Millisecond}, args)
	return result{out.String(), errb.String(), code}
}

// `ironlink quarantine --selector` and `release --selector` against a real
// hub and satellite: the preview lists the matching devices and their
// count; a refused confirmation or a wrong --expected-count changes
// nothing; "yes" quarantines them all under one request id (ListCommands
// by request_id lists exactly them); a release with --yes --wait follows
// every command to SUCCEEDED; a read-only operator sees the preview and is
// refused the act.
func TestBulkCLI(t *testing.T) {
	f := newFleet(t, 10)
	ctx := context.Background()
	var want []string
	for name := range f.nodes {
		if strings.HasPrefix(name, "node-00") {
			want = append(want, name)
		}
	}
	n := len(want)
	selector := "site=" + site + ",name=node-00*"
	before := f.commandCount()

	r := f.withStdin("no\n", "quarantine", "--selector", selector, "--reason", "rack r4 PDU swap")
	f.expect(r, ctl.ExitUsage, []string{fmt.Sprintf("%d devices match", n), site + "/" + want[0]}, []string{"Type yes", "not confirmed: nothing was changed"})
	r = f.withStdin("", "quarantine", "--selector", selector, "--expected-count", fmt.Sprint(n+1), "--yes", "--reason", "x")
	f.expect(r, ctl.ExitRefused, nil, []string{fmt.Sprintf("--expected-count %d, but the selector matches %d devices", n+1, n)})
	r = f.withStdin("", "quarantine", "--selector", selector, "--expected-count", "-1", "--yes", "--reason", "x")
	f.expect(r, ctl.ExitUsage, nil, []string{"--expected-count -1: give the number of devices you expect to match, 1 or more"})
	r = f.withStdin("", "--context", "viewer", "quarantine", "--selector", selector, "--yes", "--reason", "x")
	f.expect(r, ctl.ExitAuth, []string{fmt.Sprintf("%d devices match", n)}, []string{"operations:write"})
	// Any other key is a label (docs/reference/labels.md): a mistyped key
	// selects nothing, and nothing is done; a bad label value is refused.
	r = f.withStdin("", "quarantine", "--selector", "site="+site+",bogus=1", "--reason", "x")
	f.expect(r, ctl.ExitNotFound, nil, []string{"no device matches the selector"})
	r = f.withStdin("", "quarantine", "--selector", "site="+site+",rack=a b", "--reason", "x")
	f.expect(r, ctl.ExitUsage, nil, []string{`--selector.rack: value "a b"`})
	if got := f.commandCount(); got != before {
		t.Fatalf("refused bulk runs created %d commands", got-before)
	}

	// What each device gives back on release: the ones offered to
	// customers before the quarantine (CustomerReady True) are offered
	// again, the others stay not offered.
	offered := 0
	for _, name := range want {
		g, err := f.api.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: f.nodes[name]})
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(g.GetDevice().GetConditions(), func(c *ironlinkv1.Condition) bool {
			return c.GetType() == "CustomerReady" && c.GetStatus() == ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE
		}) {
			offered++
		}
	}
	if offered == 0 || offered == n {
		t.Fatalf("%d of the %d devices are offered: the test wants both kinds", offered, n)
	}

	r = f.withStdin("yes\n", "quarantine", "--selector", selector, "--reason", "rack r4 PDU swap")
	f.expect(r, 0, []string{fmt.Sprintf("quarantine requested for %d devices", n)}, nil)
	m := uuidRE.FindStringSubmatch(r.stdout[strings.Index(r.stdout, "request "):])
	if m == nil {
		t.Fatalf("no request id printed\n%v", r)
	}
	lc, err := f.api.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{RequestId: m[0], PageSize: 1000})
	if err != nil || len(lc.GetCommands()) != n {
		t.Fatalf("ListCommands(request_id %s): %d commands, %v; want %d", m[0], len(lc.GetCommands()), err, n)
	}
	for _, c := range lc.GetCommands() {
		if c.GetDesired() != ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED || c.GetSite() != site {
			t.Fatalf("command %v", c)
		}
	}
	// the hint on stderr names a CLI command that lists exactly them
	f.expect(r, 0, nil, []string{"ironlink get commands --request-id " + m[0]})
	r = f.run("get", "commands", "--request-id", m[0], "--limit", "0", "-o", "name")
	if r.code != 0 || strings.Count(r.stdout, "\n") != n {
		t.Fatalf("get commands --request-id: want %d lines\n%v", n, r)
	}

	// What a release would give back, counted per outcome; --dry-run stops there.
	before = f.commandCount()
	r = f.withStdin("", "release", "--selector", selector, "--dry-run", "--reason", "PDU back")
	f.expect(r, 0, []string{fmt.Sprintf("%d devices match", n), "the release would do:",
		fmt.Sprintf("\n  %d → offered to customers again (CUSTOM_CUSTOMER_READY restored, as before the quarantine)\n", offered),
		fmt.Sprintf("\n  %d → quarantine ends, stay not offered (HELD: not offered before the quarantine)\n", n-offered)},
		[]string{"dry run: nothing was changed"})
	if got := strings.Count(r.stdout, " → "); got != 2 {
		t.Fatalf("the preview has %d outcome lines, want 2 (offered again, stay not offered)\n%v", got, r)
	}
	r = f.run("release", want[0], "--site", site, "--dry-run", "--reason", "PDU back")
	f.expect(r, 0, []string{"would release: quarantine ends"}, nil)
	// a quarantined device is not offered: release it first
	r = f.run("offer", want[0], "--site", site, "--reason", "x")
	f.expect(r, ctl.ExitRefused, nil, []string{"is quarantined (held by operator)"})
	if got := f.commandCount(); got != before {
		t.Fatalf("dry runs and a refused offer created %d commands", got-before)
	}

	r = f.withStdin("", "release", "--selector", selector, "--yes", "--wait", "--timeout", "90s", "--reason", "PDU back")
	f.expect(r, 0, []string{fmt.Sprintf("release requested for %d devices", n), "SUCCEEDED"}, nil)
	if got := strings.Count(r.stdout, "SUCCEEDED"); got < n {
		t.Fatalf("%d SUCCEEDED lines, want %d\n%v", got, n, r)
	}
	// Nothing left to release: said, and nothing written.
	before = f.commandCount()
	r = f.run("release", want[0], "--site", site, "--reason", "again")
	f.expect(r, 0, []string{"not quarantined: nothing to release"}, nil)
	if got := f.commandCount(); got != before {
		t.Fatalf("a release of a device not quarantined created %d commands", got-before)
	}
}

package policy

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/internal/testlog"
)

func TestParseExample(t *testing.T) {
	data, err := os.ReadFile("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	a := f.Effective("site-a") // no entry: the default
	if !a.Enabled || !a.DryRun || len(a.Rules) != 2 || a.Guard != (Guard{5, 10, time.Hour}) || len(a.MaintenanceWindows) != 1 {
		t.Fatalf("site-a = %s", a)
	}
	r := a.Rules[0]
	if r.HoldDown != 30*time.Second || len(r.From) != 3 || r.From[2] != status.InService || len(r.To) != 1 {
		t.Errorf("rule 0 = %+v", r)
	}
	if a.Rules[1].AutoReleaseAfter != 30*time.Minute || a.Rules[1].Reasons[0] != "PowerFailure" {
		t.Errorf("rule 1 = %+v", a.Rules[1])
	}
	if a.MaintenanceWindows[0].Every != 7*24*time.Hour {
		t.Errorf("weekly = %s", a.MaintenanceWindows[0].Every)
	}
	b := f.Effective("site-b")
	if b.DryRun || b.Guard != (Guard{3, 10, time.Hour}) || len(b.Rules) != 2 || len(b.MaintenanceWindows) != 2 {
		t.Fatalf("site-b = %s", b)
	}
	if got := b.MaintenanceWindows[1].Devices[0]; got != "6f1c9e4e-2b7a-4c1e-9d3e-0a1b2c3d4e5f" {
		t.Errorf("device not canonical: %s", got)
	}
	if c := f.Effective("site-c"); c.Enabled {
		t.Errorf("site-c enabled")
	}
}

func TestParseNamesEveryProblem(t *testing.T) {
	doc := `
policy:
  default:
    enabled: true
    guard: {maxDevices: 0, maxPercent: 150, window: 10ms}
    rules:
      - name: Bad_Name
        from: [FAULTED]
        to: [AVAILABLE]
        reasons: [not-camel]
        holdDown: soon
        autoReleaseAfter: -1m
      - name: dup
      - name: dup
    maintenanceWindows:
      - {start: "yesterday", end: "2026-12-01T00:00:00Z"}
      - {start: "2026-12-02T00:00:00Z", end: "2026-12-01T00:00:00Z"}
      - {start: "2026-12-01T00:00:00Z", end: "2026-12-03T00:00:00Z", recurrence: daily, devices: [node-1]}
  sites:
    Site_X: {}
`
	_, err := Parse([]byte(doc))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"default.guard.maxDevices 0", "default.guard.maxPercent 150", "default.guard.window 10ms",
		`default.rules[0].name "Bad_Name"`, `default.rules[0].from: "FAULTED"`, `default.rules[0].to: "AVAILABLE"`,
		`default.rules[0].reasons: "not-camel"`, "default.rules[0].holdDown", "default.rules[0].autoReleaseAfter -1m0s",
		`rule name "dup" used twice`, `default.maintenanceWindows[0].start "yesterday"`, "default.maintenanceWindows[1]: end",
		"default.maintenanceWindows[2]: recurrence 24h0m0s is shorter", `default.maintenanceWindows[2].devices: "node-1"`,
		"sites.Site_X: site name",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q:\n%v", want, err)
		}
	}
}

func TestParseRefusesUnknownKeysAndMissingPolicy(t *testing.T) {
	if _, err := Parse([]byte("satellites: []\n")); err == nil || !strings.Contains(err.Error(), "no `policy` key") {
		t.Errorf("missing policy: %v", err)
	}
	if _, err := Parse([]byte("policy:\n  default:\n    enabeld: true\n")); err == nil || !strings.Contains(err.Error(), "enabeld") {
		t.Errorf("typo: %v", err)
	}
}

func TestWatcherKeepsLastGood(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/policy.yaml"
	good := "policy:\n  default:\n    enabled: true\n    rules: [{name: a}]\n"
	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	var got []*File
	w, err := NewWatcher(path, time.Hour, testlog.New(t), func(f *File) { got = append(got, f) })
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("policy:\n  default:\n    enabled: maybe\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := w.Reload(); changed || err == nil {
		t.Fatalf("bad file: changed=%t err=%v", changed, err)
	}
	if !w.Policy().Default.Enabled || w.LastError() == nil {
		t.Fatal("the last good policy is not in force")
	}
	if err := os.WriteFile(path, []byte("policy:\n  default:\n    enabled: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := w.Reload(); !changed || err != nil {
		t.Fatalf("good file: changed=%t err=%v", changed, err)
	}
	if w.Policy().Default.Enabled || len(got) != 1 || w.LastError() != nil {
		t.Fatalf("reload not in force: %+v", w.Policy().Default)
	}
}

func TestWatcherRunReloadsOnChange(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/policy.yaml"
	if err := os.WriteFile(path, []byte("policy:\n  default:\n    enabled: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := NewWatcher(path, 50*time.Millisecond, testlog.New(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if err := os.WriteFile(path, []byte("policy:\n  default:\n    enabled: true\n    rules: [{name: a}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !w.Policy().Default.Enabled {
		if time.Now().After(deadline) {
			t.Fatal("the changed file was not reloaded")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Configuration that cannot work as written is named at load: a hold-down
// shorter than --stale-after and a window that never opens again; a file
// without either gets no warning.
func TestWarnings(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	f, err := Parse([]byte(`
policy:
  default:
    enabled: true
    rules:
      - {name: quick, to: [FAULTED], holdDown: 30s}
      - {name: patient, to: [MAINTENANCE], holdDown: 5m}
    maintenanceWindows:
      - {name: done, start: "2026-11-01T00:00:00Z", end: "2026-11-01T04:00:00Z"}
      - {name: weekly, start: "2026-11-01T00:00:00Z", end: "2026-11-01T04:00:00Z", recurrence: weekly}
      - {name: later, start: "2026-12-10T00:00:00Z", end: "2026-12-10T04:00:00Z"}
  sites:
    site-off: {enabled: false, rules: [{name: fast, holdDown: 1s}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	ws := f.Warnings(3*time.Minute, now)
	if len(ws) != 2 || !strings.HasPrefix(ws[0], "default.rules[0] (quick): holdDown 30s is shorter than --stale-after 3m0s") ||
		!strings.HasPrefix(ws[1], "default.maintenanceWindows[0] (done): ended 2026-11-01T04:00:00Z and does not recur") {
		t.Fatalf("warnings %q", ws)
	}
	if ws := f.Warnings(30*time.Second, now.Add(-time.Hour*24*60)); len(ws) != 0 {
		t.Fatalf("warnings with hold-downs at stale-after and windows ahead: %q", ws)
	}
}

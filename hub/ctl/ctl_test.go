package ctl

import (
	"bytes"
	"context"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// TestImportsOnlyPublicAPI enforces doc.go's rule: the CLI uses the public
// gRPC API (gen/) and internal/, never the hub's own packages.
func TestImportsOnlyPublicAPI(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			p := strings.Trim(im.Path.Value, `"`)
			if rest, ok := strings.CutPrefix(p, "github.com/ironlink/ironlink/"); ok &&
				!strings.HasPrefix(rest, "gen/") && !strings.HasPrefix(rest, "internal/") {
				t.Errorf("%s imports %s: the CLI may use only gen/ and internal/", f, p)
			}
		}
	}
}

func TestHumanAge(t *testing.T) {
	now := time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		ago  time.Duration
		want string
	}{
		{"seconds", 5 * time.Second, "5s"},
		{"just under two minutes", 119 * time.Second, "119s"},
		{"minutes and seconds", 3*time.Minute + 12*time.Second, "3m12s"},
		{"whole minutes", 4 * time.Minute, "4m"},
		{"minutes", 45 * time.Minute, "45m"},
		{"hours and minutes", 5*time.Hour + 3*time.Minute, "5h3m"},
		{"hours", 20 * time.Hour, "20h"},
		{"days and hours", 76 * time.Hour, "3d4h"},
		{"days", 40 * 24 * time.Hour, "40d"},
		{"future clamps to zero", -time.Minute, "0s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := humanAge(now, now.Add(-tc.ago)); got != tc.want {
				t.Fatalf("humanAge(%s) = %q, want %q", tc.ago, got, tc.want)
			}
		})
	}
}

func TestParseDeviceArg(t *testing.T) {
	const id = "4f0c2d52-6f0e-4bd4-9d4b-1a7e3c0f2d11"
	tests := []struct {
		name, arg, site            string
		wantID, wantName, wantSite string
		wantErr                    bool
	}{
		{name: "name", arg: "node-007", wantName: "node-007"},
		{name: "name with --site", arg: "node-007", site: "a", wantName: "node-007", wantSite: "a"},
		{name: "site/name", arg: "a/node-007", wantName: "node-007", wantSite: "a"},
		{name: "uuid", arg: id, wantID: id},
		{name: "upper-case uuid", arg: strings.ToUpper(id), wantID: id},
		{name: "site/uuid", arg: "a/" + id, wantID: id, wantSite: "a"},
		{name: "site disagrees", arg: "a/node-007", site: "b", wantErr: true},
		{name: "empty", arg: " ", wantErr: true},
		{name: "half", arg: "a/", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := parseDeviceArg(tc.arg, tc.site)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err == nil && (d.id != tc.wantID || d.name != tc.wantName || d.site != tc.wantSite) {
				t.Fatalf("got id %q name %q site %q", d.id, d.name, d.site)
			}
		})
	}
}

// TestConfigContexts: set-context creates and updates only the given
// fields, use-context switches, other contexts survive, and the
// environment and flags override the context.
func TestConfigContexts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "config.yaml")
	env := map[string]string{EnvConfig: path}
	run := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := Execute(context.Background(), Options{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }}, args)
		return out.String(), errb.String(), code
	}
	if _, _, code := run("config", "set-context", "a", "--hub", "a:1", "--ca", "ca.pem", "--client-id", "ops-a", "--key", "/k/a.pem", "--use"); code != 0 {
		t.Fatalf("set-context a: exit %d", code)
	}
	if _, _, code := run("config", "set-context", "b", "--hub", "b:1", "--client-id", "ops-b", "--key", "/k/b.pem"); code != 0 {
		t.Fatalf("set-context b: exit %d", code)
	}
	if _, _, code := run("config", "set-context", "a", "--hub", "a:2"); code != 0 {
		t.Fatalf("update a: exit %d", code)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := cfg.Context("a")
	wd, _ := os.Getwd()
	if cfg.CurrentContext != "a" || len(cfg.Contexts) != 2 || a.Hub != "a:2" || a.ClientID != "ops-a" || a.CA != filepath.Join(wd, "ca.pem") {
		t.Fatalf("config after updates: %+v", cfg)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("config file mode: %v %v", st.Mode(), err)
	}
	if out, _, code := run("config", "get-contexts"); code != 0 || !strings.Contains(out, "*        a") || !strings.Contains(out, "b:1") {
		t.Fatalf("get-contexts: %d\n%s", code, out)
	}
	if _, _, code := run("config", "use-context", "c"); code != ExitNotFound {
		t.Fatalf("use-context of an unknown context: exit %d", code)
	}
	if _, _, code := run("config", "use-context", "b"); code != 0 {
		t.Fatal("use-context b")
	}
	if out, _, _ := run("config", "current-context"); out != "b\n" {
		t.Fatalf("current-context %q", out)
	}

	tests := []struct {
		name          string
		flags         connFlags
		env           map[string]string
		hub, clientID string
	}{
		{"current context", connFlags{}, nil, "b:1", "ops-b"},
		{"--context", connFlags{context: "a"}, nil, "a:2", "ops-a"},
		{"IRONLINK_CONTEXT", connFlags{}, map[string]string{EnvContext: "a"}, "a:2", "ops-a"},
		{"env overrides the context", connFlags{}, map[string]string{EnvHub: "env:1", EnvClientID: "ops-env"}, "env:1", "ops-env"},
		{"flags override the env", connFlags{hub: "flag:1"}, map[string]string{EnvHub: "env:1"}, "flag:1", "ops-b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := map[string]string{EnvConfig: path}
			for k, v := range tc.env {
				e[k] = v
			}
			s, err := resolveSettings(tc.flags, func(k string) string { return e[k] })
			if err != nil {
				t.Fatal(err)
			}
			if s.Hub != tc.hub || s.ClientID != tc.clientID || s.Audience != DefaultAudience {
				t.Fatalf("settings %+v", s)
			}
		})
	}

	// a typo in the file is an error naming it
	if err := os.WriteFile(path, []byte("contexts:\n  - name: a\n    hubb: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := run("get", "sites"); code != ExitUsage || !strings.Contains(errOut, "hubb") {
		t.Fatalf("typo in config: exit %d %s", code, errOut)
	}
}

func TestStatusListAcceptsHyphens(t *testing.T) {
	got, err := parseEnumList[ironlinkv1.OperationalStatus]("status", "in-service,FAULTED, in_service", ironlinkv1.OperationalStatus_value, "OPERATIONAL_STATUS_")
	if err != nil {
		t.Fatal(err)
	}
	want := []ironlinkv1.OperationalStatus{ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_IN_SERVICE, ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED, ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_IN_SERVICE}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if _, err := parseEnumList[ironlinkv1.OperationalStatus]("status", "in-servic", ironlinkv1.OperationalStatus_value, "OPERATIONAL_STATUS_"); err == nil || !strings.Contains(err.Error(), "in_service") {
		t.Fatalf("a misspelt status: err %v, want the valid names listed", err)
	}
}

// TestInvalidUTF8ArgumentIsUsage: an argument or flag that is not valid
// UTF-8 (a proto3 string cannot carry it) is a usage error naming the
// field, exit 2, before anything is sent — not grpc-go's client-side
// "Internal: grpc: error while marshaling" (exit 1).
func TestInvalidUTF8ArgumentIsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"describe", "device", "node\xff"},
		{"get", "devices", "--site", "de\xffmo"},
		{"get", "devices", "--name", "bad\xfe*"},
	} {
		var out, errb bytes.Buffer
		code := Execute(context.Background(), Options{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }},
			append([]string{"--config", filepath.Join(t.TempDir(), "none.yaml"), "--hub", "127.0.0.1:1", "--plaintext", "--no-auth", "--request-timeout", "2s"}, args...))
		if code != ExitUsage || !strings.Contains(errb.String(), "not valid UTF-8") {
			t.Errorf("%q: exit %d %q, want %d and \"not valid UTF-8\"", args, code, errb.String(), ExitUsage)
		}
	}
}

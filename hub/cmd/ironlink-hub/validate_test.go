package main

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain lets the tests run this test binary as the ironlink-hub process
// itself (IRONLINK_HUB_AS_MAIN=1): main, its exit code and its output, as
// an operator sees them.
func TestMain(m *testing.M) {
	if os.Getenv("IRONLINK_HUB_AS_MAIN") == "1" {
		os.Args = append([]string{"ironlink-hub"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// hubProcess runs ironlink-hub args as a child process with env added to a
// clean environment and returns its exit code, stdout and stderr.
func hubProcess(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append([]string{"IRONLINK_HUB_AS_MAIN=1", "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("run ironlink-hub %v: %v", args, err)
	return 0, "", ""
}

// `ironlink-hub validate` loads serve's flags and environment, reads the
// roster and the TLS files, and exits 1 naming every problem, or 0 with
// one OK line.
func TestValidateSubcommand(t *testing.T) {
	dir := t.TempDir()
	pki := filepath.Join(dir, "pki")
	if code, _, stderr := hubProcess(t, nil, "dev-pki", "--dir", pki); code != 0 {
		t.Fatalf("dev-pki: exit %d: %s", code, stderr)
	}
	code, entry, stderr := hubProcess(t, nil, "keygen", "--client-id", "ironlink-agent-a", "--out", filepath.Join(dir, "a.pem"))
	if code != 0 {
		t.Fatalf("keygen: exit %d: %s", code, stderr)
	}
	roster := filepath.Join(dir, "roster.yaml")
	if err := os.WriteFile(roster, []byte("satellites:\n"+entry), 0o600); err != nil {
		t.Fatal(err)
	}
	badRoster := filepath.Join(dir, "bad-roster.yaml")
	if err := os.WriteFile(badRoster, []byte("satellites:\n  - clientId: ironlink-agent-a\n    site: b\n    keys: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	goodKey := filepath.Join(dir, "enrol.key")
	if err := os.WriteFile(goodKey, []byte(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shortKey := filepath.Join(dir, "short.key")
	if err := os.WriteFile(shortKey, []byte(base64.StdEncoding.EncodeToString([]byte("sixteen bytes!!!"))), 0o600); err != nil {
		t.Fatal(err)
	}
	policyFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(`policy:
  default:
    enabled: true
    rules:
      - {name: quick, to: [FAULTED], holdDown: 30s}
      - {name: patient, to: [MAINTENANCE], holdDown: 5m}
    maintenanceWindows:
      - {name: done, start: "2020-11-01T00:00:00Z", end: "2020-11-01T04:00:00Z"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	badPolicy := filepath.Join(dir, "bad-policy.yaml")
	if err := os.WriteFile(badPolicy, []byte("policy:\n  default:\n    enabled: true\n    rules: [{name: r, holdDown: soon}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := "--database-url=postgres://postgres@127.0.0.1:5432/ironlink?sslmode=disable"
	tls := []string{"--tls-cert", filepath.Join(pki, "server.pem"), "--tls-key", filepath.Join(pki, "server-key.pem")}
	cases := []struct {
		name       string
		env        []string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr []string
	}{
		{name: "development settings", args: []string{db, "--no-auth", "--plaintext"}, wantStdout: "ironlink-hub: configuration OK\n"},
		{name: "roster and TLS", args: append([]string{db, "--roster", roster}, tls...), wantStdout: "ironlink-hub: configuration OK\n"},
		{name: "from the environment", env: []string{"DATABASE_URL=postgres://127.0.0.1/x", "IRONLINK_HUB_ROSTER=" + roster,
			"IRONLINK_TLS_CERT=" + tls[1], "IRONLINK_TLS_KEY=" + tls[3]}, wantStdout: "ironlink-hub: configuration OK\n"},
		{name: "nothing given", wantCode: 1, wantStderr: []string{"--database-url or DATABASE_URL", "--roster or IRONLINK_HUB_ROSTER", "--tls-cert, --tls-key"}},
		{name: "bad roster entry", args: append([]string{db, "--roster", badRoster}, tls...), wantCode: 1,
			wantStderr: []string{"invalid: --roster: roster " + badRoster, "ironlink-agent-a"}},
		{name: "missing roster and key files", args: []string{db, "--roster", filepath.Join(dir, "nope.yaml"), "--tls-cert", tls[1], "--tls-key", filepath.Join(dir, "nokey.pem")},
			wantCode: 1, wantStderr: []string{"invalid: --roster: read roster", "invalid: TLS (--tls-cert, --tls-key, --tls-client-ca)", "nokey.pem"}},
		{name: "keepalive min above keepalive", args: []string{db, "--no-auth", "--plaintext", "--keepalive-min-time", "1m"}, wantCode: 1,
			wantStderr: []string{"keepalive min time 1m0s is above the keepalive time 30s"}},
		{name: "bad database URL and listen address", args: []string{"--database-url", "postgres://[::1", "--listen", "nohostport", "--no-auth", "--plaintext"}, wantCode: 1,
			wantStderr: []string{"invalid: --database-url", `invalid: --listen "nohostport"`}},
		{name: "enrolment key", args: []string{db, "--no-auth", "--plaintext", "--enrol-key-file", goodKey}, wantStdout: "ironlink-hub: configuration OK\n"},
		{name: "enrolment key of the wrong size", env: []string{"IRONLINK_HUB_ENROL_KEY_FILE=" + shortKey}, args: []string{db, "--no-auth", "--plaintext"}, wantCode: 1,
			wantStderr: []string{"invalid: --enrol-key-file", shortKey, "16 bytes, want 32"}},
		{name: "policy that cannot work as written", args: []string{db, "--no-auth", "--plaintext", "--policy-file", policyFile},
			wantStdout: "ironlink-hub: configuration OK (2 warnings)\n", wantStderr: []string{
				"warning: --policy-file: default.rules[0] (quick): holdDown 30s is shorter than --stale-after 3m0s",
				"warning: --policy-file: default.maintenanceWindows[0] (done): ended 2020-11-01T04:00:00Z and does not recur: it never opens again"}},
		{name: "policy hold-downs at --stale-after", args: []string{db, "--no-auth", "--plaintext", "--policy-file", policyFile, "--stale-after", "30s"},
			wantStdout: "ironlink-hub: configuration OK (1 warning)\n", wantStderr: []string{"default.maintenanceWindows[0] (done)"}},
		{name: "invalid policy", args: []string{db, "--no-auth", "--plaintext", "--policy-file", badPolicy}, wantCode: 1,
			wantStderr: []string{"invalid: --policy-file"}},
		{name: "bad log level", args: []string{db, "--no-auth", "--plaintext", "--log-level", "loud"}, wantCode: 1, wantStderr: []string{`log level "loud"`}},
		{name: "malformed duration in the environment", env: []string{"IRONLINK_HUB_STALE_AFTER=soon"}, args: []string{db, "--no-auth", "--plaintext"}, wantCode: 1,
			wantStderr: []string{`IRONLINK_HUB_STALE_AFTER="soon"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := hubProcess(t, tc.env, append([]string{"validate"}, tc.args...)...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.wantCode, stdout, stderr)
			}
			if tc.wantCode == 0 && (stdout != tc.wantStdout || (stderr != "") != (len(tc.wantStderr) > 0)) {
				t.Fatalf("stdout %q, stderr %q; want stdout %q and stderr only with warnings", stdout, stderr, tc.wantStdout)
			}
			if tc.wantCode != 0 && stdout != "" {
				t.Errorf("stdout %q, want nothing when invalid", stdout)
			}
			for _, w := range tc.wantStderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

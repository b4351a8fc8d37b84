package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain lets the tests run this test binary as the ironlink-satellite
// process itself (IRONLINK_SATELLITE_AS_MAIN=1): main, its exit code and
// its output, as an operator sees them.
func TestMain(m *testing.M) {
	if os.Getenv("IRONLINK_SATELLITE_AS_MAIN") == "1" {
		os.Args = append([]string{"ironlink-satellite"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// satellite runs ironlink-satellite args as a child process in a clean
// environment plus env, bounded by 20 s, and returns its exit code, stdout
// and stderr.
func satellite(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append([]string{"IRONLINK_SATELLITE_AS_MAIN=1", "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(20*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("run ironlink-satellite %v: %v", args, err)
	return 0, "", ""
}

// writeFile writes content to a new file in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// clientKey writes a PKCS#8 Ed25519 private key PEM and returns its path.
func clientKey(t *testing.T, dir string) string {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, "key.pem", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
}

const cloudsYAML = `clouds:
  appcred:
    auth_type: v3applicationcredential
    auth:
      auth_url: http://127.0.0.1:1/identity/v3
      application_credential_id: abc
      application_credential_secret: s3cret
  nodomain:
    auth_type: password
    auth:
      auth_url: http://127.0.0.1:1/identity/v3
      username: ops
      password: pw
      project_id: p1
`

// `ironlink-satellite validate` loads a run's flags and environment, reads
// the client key, the TLS files and clouds.yaml, and exits 1 naming every
// problem, or 0 with one OK line; it contacts nothing.
func TestValidateSubcommand(t *testing.T) {
	dir := t.TempDir()
	key := clientKey(t, dir)
	clouds := writeFile(t, dir, "clouds.yaml", cloudsYAML)
	base := []string{"--site", "a", "--client-key", key, "--clouds-yaml", clouds}
	cases := []struct {
		name       string
		env        []string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr []string
	}{
		{name: "application credential cloud", args: append(base, "--cloud", "appcred"),
			wantStdout: "ironlink-satellite: configuration OK (site a, cloud \"appcred\", application credential)\n"},
		{name: "from the environment", env: []string{"IRONLINK_SITE=a", "IRONLINK_CLIENT_KEY=" + key, "OS_CLIENT_CONFIG_FILE=" + clouds, "OS_CLOUD=appcred",
			"IRONLINK_VALIDATION_POOL=resource_class=gpu-validate"},
			wantStdout: "ironlink-satellite: configuration OK (site a, cloud \"appcred\", application credential)\n"},
		{name: "password cloud without a user domain", args: append(base, "--cloud", "nodomain"), wantCode: 1,
			wantStderr: []string{"invalid: openstack: cloud \"nodomain\"", "(password)", "You must provide exactly one of DomainID or DomainName to authenticate by Username"}},
		{name: "cloud not in clouds.yaml", args: append(base, "--cloud", "other"), wantCode: 1, wantStderr: []string{`cloud "other"`}},
		{name: "operations cloud not in clouds.yaml", args: append(base, "--cloud", "appcred", "--operations-cloud", "ops"), wantCode: 1,
			wantStderr: []string{`--operations-cloud "ops" (IRONLINK_OPERATIONS_CLOUD)`, `cloud "ops"`}},
		{name: "operations cloud in clouds.yaml", args: append(base, "--cloud", "appcred", "--operations-cloud", "appcred"),
			wantStdout: "ironlink-satellite: configuration OK (site a, cloud \"appcred\", application credential)\n"},
		{name: "nothing given", args: []string{"--clouds-yaml", clouds, "--cloud", "appcred"}, wantCode: 1,
			wantStderr: []string{"site is required (--site or IRONLINK_SITE)", "a client key is required (--client-key or IRONLINK_CLIENT_KEY)"}},
		{name: "bad selector", args: append(base, "--cloud", "appcred", "--validation-pool", "colour=blue"), wantCode: 1, wantStderr: []string{"invalid: --validation-pool"}},
		{name: "unreadable key and CA, bad modes", args: []string{"--site", "a", "--client-key", filepath.Join(dir, "nokey.pem"), "--hub-ca", filepath.Join(dir, "noca.pem"),
			"--clouds-yaml", clouds, "--cloud", "appcred", "--placement", "maybe"}, wantCode: 1,
			wantStderr: []string{"noca.pem", `placement mode "maybe" (--placement)`}},
		{name: "bad site and poll interval", args: append(base, "--cloud", "appcred", "--site", "Site_A", "--poll-interval", "10ms"), wantCode: 1,
			wantStderr: []string{"invalid: --site", "poll interval 10ms is below 1s"}},
		{name: "malformed duration in the environment", env: []string{"IRONLINK_SWEEP_INTERVAL=often"}, args: append(base, "--cloud", "appcred"), wantCode: 1,
			wantStderr: []string{`IRONLINK_SWEEP_INTERVAL="often"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := satellite(t, tc.env, append([]string{"validate"}, tc.args...)...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.wantCode, stdout, stderr)
			}
			if tc.wantCode == 0 && (stdout != tc.wantStdout || stderr != "") {
				t.Fatalf("stdout %q, stderr %q; want stdout %q and no stderr", stdout, stderr, tc.wantStdout)
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

// A metrics port already in use stops the satellite at start with an
// error naming the flag, before it talks to OpenStack (before the fix it
// was "metrics: listen on ..." with Keystone noise logged first).
func TestMetricsPortInUseIsAStartError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	clouds := writeFile(t, dir, "clouds.yaml", cloudsYAML)
	code, _, stderr := satellite(t, nil, "--site", "a", "--no-auth", "--hub-plaintext", "--hub", "127.0.0.1:1",
		"--clouds-yaml", clouds, "--cloud", "appcred", "--metrics-addr", ln.Addr().String())
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, stderr)
	}
	want := "ironlink-satellite: --metrics-addr " + ln.Addr().String() + " (IRONLINK_METRICS_ADDR): "
	if !strings.Contains(stderr, want) || !strings.Contains(stderr, "address already in use") {
		t.Errorf("stderr lacks %q ... address already in use:\n%s", want, stderr)
	}
	for _, not := range []string{"Keystone", "OpenStack"} {
		if strings.Contains(stderr, not) {
			t.Errorf("stderr mentions %s:\n%s", not, stderr)
		}
	}
}

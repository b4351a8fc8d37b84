package openstack_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/syncbuf"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
)

// writeClouds writes a clouds.yaml with one cloud "c" whose auth block is
// auth (indented lines under "auth:") and returns its path.
func writeClouds(t *testing.T, authType, authURL, auth string) string {
	t.Helper()
	doc := fmt.Sprintf("clouds:\n  c:\n    auth_type: %s\n    auth:\n      auth_url: %s\n%s    region_name: RegionOne\n    interface: public\n    identity_api_version: 3\n",
		authType, authURL, auth)
	path := filepath.Join(t.TempDir(), "clouds.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Check refuses, before any request, a clouds.yaml that cannot
// authenticate whatever Keystone says, with gophercloud's own message and
// ErrConfig; and says which auth method a good one uses.
func TestCheckNamesIncompleteClouds(t *testing.T) {
	const url = "http://127.0.0.1:1/identity/v3"
	_, simCfg := ostest.StartSim(t, openstacksim.Options{})
	fifo := filepath.Join(t.TempDir(), "clouds.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		cfg        openstack.Config
		wantErr    []string // substrings; none: valid
		wantMethod openstack.AuthMethod
	}{
		{name: "application credential", cfg: simCfg, wantMethod: openstack.AuthApplicationCredential},
		{name: "password with domains", cfg: openstack.Config{Cloud: "c", CloudsYAML: writeClouds(t, "password", url,
			"      username: ops\n      password: pw\n      user_domain_name: Default\n      project_name: p\n      project_domain_name: Default\n")},
			wantMethod: openstack.AuthPassword},
		{name: "password without a user domain", cfg: openstack.Config{Cloud: "c", CloudsYAML: writeClouds(t, "password", url,
			"      username: ops\n      password: pw\n      project_id: 0123\n")},
			wantErr: []string{"You must provide exactly one of DomainID or DomainName to authenticate by Username", "(password)", `cloud "c"`}},
		{name: "project name without a project domain", cfg: openstack.Config{Cloud: "c", CloudsYAML: writeClouds(t, "password", url,
			"      username: ops\n      password: pw\n      user_domain_name: Default\n      project_name: p\n")},
			wantErr: []string{"You must provide exactly one of DomainID or DomainName in a Scope with ProjectName"}},
		{name: "application credential without a secret", cfg: openstack.Config{Cloud: "c", CloudsYAML: writeClouds(t, "v3applicationcredential", url,
			"      application_credential_id: abc\n")},
			wantErr: []string{"You must provide an Application Credential Secret"}},
		{name: "cloud not in the file", cfg: openstack.Config{Cloud: "nope", CloudsYAML: simCfg.CloudsYAML}, wantErr: []string{`cloud "nope"`}},
		{name: "named pipe (gophercloud would block on it)", cfg: openstack.Config{Cloud: "c", CloudsYAML: fifo}, wantErr: []string{"clouds.fifo is a named pipe"}},
		{name: "file missing", cfg: openstack.Config{Cloud: "c", CloudsYAML: filepath.Join(t.TempDir(), "none.yaml")}, wantErr: []string{"none.yaml"}},
		{name: "bad placement mode", cfg: openstack.Config{Cloud: "sim", CloudsYAML: simCfg.CloudsYAML, Placement: "maybe"}, wantErr: []string{`placement mode "maybe" (--placement)`}},
		{name: "nova on, placement off", cfg: openstack.Config{Cloud: "sim", CloudsYAML: simCfg.CloudsYAML, Placement: "off", Nova: "on"}, wantErr: []string{"standalone site has no Nova"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := openstack.Check(tc.cfg)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				if got.Method != tc.wantMethod {
					t.Fatalf("method %q, want %q", got.Method, tc.wantMethod)
				}
				return
			}
			if !errors.Is(err, openstack.ErrConfig) {
				t.Fatalf("Check: %v, want an ErrConfig", err)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
		})
	}
}

// A password cloud without a user domain is a configuration error:
// OpenStackAuthenticated False/ConfigInvalid with gophercloud's message,
// no token request sent and nothing to retry (before the fix: Unknown/
// KeystoneUnreachable, asked again with backoff for ever).
func TestConnectReportsIncompleteCloudAsConfigInvalid(t *testing.T) {
	sim, simCfg := ostest.StartSim(t, openstacksim.Options{})
	cfg := openstack.Config{Cloud: "c", CloudsYAML: writeClouds(t, "password", simAuthURL(t, simCfg), "      username: ops\n      password: pw\n      project_id: 0123\n")}
	var logs syncbuf.Buffer
	guard := openstack.NewAuthGuard(slog.New(slog.NewTextHandler(&logs, nil)))
	cfg.AuthGuard = guard
	sim.ResetRequests()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := openstack.Connect(ctx, cfg, ostest.Logger(t))
	if !errors.Is(err, openstack.ErrConfig) {
		t.Fatalf("Connect: %v, want ErrConfig", err)
	}
	st := guard.State()
	if st.Status != "False" || st.Reason != openstack.ReasonConfigInvalid || !st.NextAttempt.IsZero() {
		t.Fatalf("guard state %+v, want False/ConfigInvalid without a next attempt", st)
	}
	if !strings.Contains(st.Message, "You must provide exactly one of DomainID or DomainName to authenticate by Username") {
		t.Errorf("message %q lacks gophercloud's", st.Message)
	}
	if n := len(sim.Requests()); n != 0 {
		t.Errorf("%d requests reached the cloud, want none", n)
	}
	if l := logs.String(); strings.Contains(l, "application credential") {
		t.Errorf("log hints at application credentials on a password cloud:\n%s", l)
	}
}

// A password that Keystone refuses gets a hint about passwords, not about
// application credentials (before the fix the hint was always the latter).
func TestRefusedPasswordHintFitsTheAuthMethod(t *testing.T) {
	_, simCfg := ostest.StartSim(t, openstacksim.Options{})
	cfg := openstack.Config{Cloud: "c", CloudsYAML: writeClouds(t, "password", simAuthURL(t, simCfg),
		"      username: ops\n      password: pw\n      user_domain_name: Default\n      project_id: 0123\n")}
	var logs syncbuf.Buffer
	guard := openstack.NewAuthGuard(slog.New(slog.NewTextHandler(&logs, nil)))
	cfg.AuthGuard = guard
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := openstack.Connect(ctx, cfg, ostest.Logger(t))
	if err == nil || errors.Is(err, openstack.ErrConfig) {
		t.Fatalf("Connect: %v, want Keystone's refusal", err)
	}
	st := guard.State()
	if st.Status == "True" || st.Reason == openstack.ReasonConfigInvalid {
		t.Fatalf("guard state %+v, want a refused or failed token request", st)
	}
	all := err.Error() + "\n" + logs.String()
	if strings.Contains(all, "application credential") {
		t.Errorf("hints at application credentials on a password cloud:\n%s", all)
	}
	if !strings.Contains(logs.String(), "check the user, password, domain and project in clouds.yaml") || !strings.Contains(logs.String(), "auth_method=password") {
		t.Errorf("log lacks the password hint:\n%s", logs.String())
	}
}

// simAuthURL is the auth_url of the simulator's clouds.yaml.
func simAuthURL(t *testing.T, cfg openstack.Config) string {
	t.Helper()
	b, err := os.ReadFile(cfg.CloudsYAML)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "auth_url: ")
	if !ok {
		t.Fatalf("no auth_url in %s", b)
	}
	url, _, _ := strings.Cut(rest, "\n")
	return url
}

// verify: false in clouds.yaml turns TLS verification towards OpenStack
// off: Check refuses it (ErrConfig, naming the flag) unless
// AllowInsecureTLS, and then says so (InsecureTLS).
func TestCheckRefusesVerifyFalseUnlessAllowed(t *testing.T) {
	path := writeClouds(t, "v3applicationcredential", "https://keystone.example:5000/v3",
		"      application_credential_id: id\n      application_credential_secret: s\n")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, "    verify: false\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := openstack.Config{CloudsYAML: path, Cloud: "c"}
	_, err = openstack.Check(cfg)
	if !errors.Is(err, openstack.ErrConfig) || !strings.Contains(err.Error(), "verify: false") || !strings.Contains(err.Error(), "--openstack-insecure-skip-verify") {
		t.Fatalf("verify: false without the flag: %v, want ErrConfig naming verify: false and the flag", err)
	}
	cfg.AllowInsecureTLS = true
	c, err := openstack.Check(cfg)
	if err != nil || !c.InsecureTLS || c.TLS == nil || !c.TLS.InsecureSkipVerify {
		t.Fatalf("verify: false with the flag: InsecureTLS=%v err=%v", c.InsecureTLS, err)
	}
	// A cloud that verifies is not marked, flag or not.
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := openstack.Check(cfg); err != nil || c.InsecureTLS {
		t.Fatalf("verifying cloud: InsecureTLS=%v err=%v", c.InsecureTLS, err)
	}
}

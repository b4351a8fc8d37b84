package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ironlink/ironlink/internal/auth"
)

// keygen → roster entry → token → Verify, for each algorithm and both kinds of client.
func TestKeygenAndToken(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args     []string
		section  string
		clientID string
		kid      string
		scopes   []string
		site     string
	}{
		{[]string{"--client-id", "ironlink-agent-site-a", "--alg", "ES256", "--kid", "2026-11"}, "satellites", "ironlink-agent-site-a", "2026-11",
			[]string{auth.ScopeDeviceUpdate, auth.ScopeDeviceConditionCreate}, "site-a"},
		{[]string{"--client-id", "ops-console", "--alg", "RS256", "--scopes", "operations:read, operations:write"}, "operators", "ops-console", "",
			[]string{auth.ScopeOperationsRead, auth.ScopeOperationsWrite}, ""},
		{[]string{"--client-id", "ops-reader", "--alg", "EdDSA"}, "operators", "ops-reader", "", []string{auth.ScopeOperationsRead}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.clientID, func(t *testing.T) {
			keyFile := filepath.Join(dir, tc.clientID+".pem")
			var out, errOut bytes.Buffer
			if err := keygenTo(append(tc.args, "--out", keyFile), &out, &errOut); err != nil {
				t.Fatalf("keygen: %v\n%s", err, errOut.String())
			}
			fi, err := os.Stat(keyFile)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("key file: %v %v", fi, err)
			}
			if !strings.HasPrefix(out.String(), "# "+tc.section+":\n") || strings.Contains(out.String(), "PRIVATE") {
				t.Fatalf("keygen printed:\n%s", out.String())
			}
			r, err := auth.ParseRoster([]byte(tc.section + ":\n" + strings.SplitN(out.String(), "\n", 2)[1]))
			if err != nil {
				t.Fatalf("printed entry does not parse: %v\n%s", err, out.String())
			}
			c := r.Client(tc.clientID)
			if c == nil || c.Site != tc.site || strings.Join(c.Scopes, ",") != strings.Join(tc.scopes, ",") || len(c.Keys) != 1 {
				t.Fatalf("entry = %+v", c)
			}
			if tc.kid != "" && c.Keys[0].KID != tc.kid {
				t.Fatalf("kid = %s", c.Keys[0].KID)
			}

			args := []string{"--key", keyFile, "--client-id", tc.clientID, "--audience", "https://hub.example", "--lifetime", "90s"}
			if tc.kid != "" {
				args = append(args, "--kid", tc.kid)
			}
			out.Reset()
			if err := tokenTo(args, &out, &errOut); err != nil {
				t.Fatalf("token: %v", err)
			}
			tok := strings.TrimSpace(out.String())
			v := &auth.Verifier{Roster: func() *auth.Roster { return r }, Audience: "https://hub.example", Replay: &auth.MemoryReplayCache{}}
			id, err := v.Verify(context.Background(), tok)
			if err != nil || id.ClientID != tc.clientID || id.KeyID != c.Keys[0].KID {
				t.Fatalf("minted token: %+v %v", id, err)
			}
		})
	}

	// keygen refuses to overwrite a key unless --force.
	keyFile := filepath.Join(dir, "ops-reader.pem")
	before, _ := os.ReadFile(keyFile)
	var out, errOut bytes.Buffer
	if err := keygenTo([]string{"--client-id", "ops-reader", "--out", keyFile}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("overwrite: %v", err)
	}
	if after, _ := os.ReadFile(keyFile); !bytes.Equal(before, after) {
		t.Fatal("key overwritten")
	}
	if err := keygenTo([]string{"--client-id", "ops-reader", "--out", keyFile, "--force"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
}

func TestKeygenRefusesBadEntries(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--client-id", "ironlink-agent-Bad_Site"},
		{"--client-id", "ops", "--scopes", "operations:admin"},
		{"--client-id", "ops", "--scopes", "device:update"},
		{"--client-id", "ops", "--alg", "HS256"},
		{"--client-id", "agent-x", "--site", "x"},
		{"--out", filepath.Join(dir, "k.pem")},
	} {
		out := filepath.Join(dir, "k.pem")
		var so, se bytes.Buffer
		if err := keygenTo(append(args, "--out", out), &so, &se); err == nil {
			t.Errorf("keygen %v: accepted", args)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("keygen %v wrote a key", args)
			os.Remove(out)
		}
	}
	var so, se bytes.Buffer
	if err := tokenTo([]string{"--client-id", "x"}, &so, &se); err == nil {
		t.Error("token without --key accepted")
	}
	if err := tokenTo([]string{"--key", filepath.Join(dir, "missing.pem"), "--client-id", "x"}, &so, &se); err == nil {
		t.Error("token with a missing key accepted")
	}
}

func TestDevPKI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	var out, errOut bytes.Buffer
	if err := devPKITo([]string{"--dir", dir, "--client", "ironlink-agent-demo, ops-console"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	// Every variable printed is one a program reads: the hub's server
	// certificate and client CA, the satellite's hub CA.
	for _, want := range []string{"IRONLINK_HUB_CA=" + filepath.Join(dir, "ca.pem"), "IRONLINK_TLS_CERT=" + filepath.Join(dir, "server.pem"),
		"IRONLINK_TLS_KEY=" + filepath.Join(dir, "server-key.pem"), "IRONLINK_TLS_CLIENT_CA=" + filepath.Join(dir, "ca.pem")} {
		if !strings.Contains(out.String(), want+"\n") {
			t.Fatalf("output %q lacks %q", out.String(), want)
		}
	}
	read := readVariables(t)
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if name, _, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") && !read[name] {
			t.Errorf("dev-pki prints %s, which no program reads", name)
		}
	}
	for _, m := range regexp.MustCompile(`(IRONLINK_[A-Z0-9_]+)=`).FindAllStringSubmatch(errOut.String(), -1) {
		if !read[m[1]] {
			t.Errorf("dev-pki names %s on stderr, which no program reads", m[1])
		}
	}
	if want := "IRONLINK_TLS_CLIENT_CERT=" + filepath.Join(dir, "client-ironlink-agent-demo.pem"); !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr %q lacks %q", errOut.String(), want)
	}
	for _, f := range []string{"client-ironlink-agent-demo.pem", "client-ops-console-key.pem"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := devPKITo(nil, &out, &errOut); err == nil {
		t.Fatal("dev-pki without --dir accepted")
	}
}

// readVariables returns the environment variables ironlink-hub and
// ironlink-satellite read, from the sources that define their flags.
func readVariables(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, f := range []string{"flags.go", filepath.Join("..", "..", "..", "satellite", "cmd", "ironlink-satellite", "flags.go")} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`"(IRONLINK_[A-Z0-9_]+)"`).FindAllStringSubmatch(string(src), -1) {
			out[m[1]] = true
		}
	}
	return out
}

package main

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/auth"
)

func TestWebCert(t *testing.T) {
	dir := t.TempDir()
	keyPath, certPath := filepath.Join(dir, "op.pem"), filepath.Join(dir, "op-cert.pem")
	k, err := auth.GenerateKey(auth.AlgES256)
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.WritePrivateKeyPEM(keyPath, k); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if err := run([]string{"web-cert", "--key", keyPath, "--client-id", "ops-alice", "--out", certPath, "--valid-for", "48h"}, &stderr); err != nil {
		t.Fatalf("web-cert: %v (%s)", err, stderr.String())
	}
	b, err := os.ReadFile(certPath)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("no PEM in %s", b)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	type equaler interface{ Equal(crypto.PublicKey) bool }
	if !c.PublicKey.(equaler).Equal(k.Public()) || c.Subject.CommonName != "ops-alice" ||
		time.Until(c.NotAfter) > 48*time.Hour || time.Until(c.NotAfter) < 47*time.Hour {
		t.Fatalf("certificate: CN %q, key match %v, not after %s", c.Subject.CommonName, c.PublicKey.(equaler).Equal(k.Public()), c.NotAfter)
	}
	if err := c.CheckSignature(c.SignatureAlgorithm, c.RawTBSCertificate, c.Signature); err != nil {
		t.Fatalf("not self-signed by the key: %v", err)
	}
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"missing flags", []string{"web-cert", "--key", keyPath}, "--key, --client-id and --out are required"},
		{"unreadable key", []string{"web-cert", "--key", filepath.Join(dir, "nope.pem"), "--client-id", "x", "--out", certPath}, "web-cert:"},
		{"proxy without upstream", []string{"web-proxy", "--token-file", keyPath}, "--upstream and --token-file are required"},
		{"proxy with a short token", []string{"web-proxy", "--upstream", "unix:/nonexistent", "--user", "u", "--token-file", writeFile(t, dir, "short")}, "at least 16 bytes"},
		{"proxy without a user", []string{"web-proxy", "--upstream", "unix:/nonexistent", "--token-file", writeFile(t, dir, strings.Repeat("t", 20))}, "no user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(tc.args, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("%v: %v, want %q", tc.args, err, tc.err)
			}
		})
	}
}

func writeFile(t *testing.T, dir, content string) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "token")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

func TestWebHelp(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"serve lists the fleet view flags", []string{"serve", "-h"}, []string{"-web-addr", "env IRONLINK_HUB_WEB_ADDR", "-web-auth", "-web-trusted-proxies", "-web-user-header"}},
		{"web-proxy", []string{"web-proxy", "-h"}, []string{"-upstream", "-token-file", "-user", "\nflags:\n"}},
		{"web-cert", []string{"web-cert", "-h"}, []string{"-key", "-client-id", "-out", "\nflags:\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if err := run(tc.args, &stderr); !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("-h: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("help lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

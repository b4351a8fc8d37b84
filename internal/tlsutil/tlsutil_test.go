package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/syncbuf"
)

// serveTLS accepts TLS connections with cfg on 127.0.0.1 and completes
// each handshake; it returns the address.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = c.(*tls.Conn).Handshake()
				_, _ = c.Write([]byte("x"))
				c.Close()
			}()
		}
	}()
	return lis.Addr().String()
}

// handshake dials addr with cfg and returns the server's leaf certificate.
func handshake(addr string, cfg *tls.Config) (*x509.Certificate, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// TLS 1.3 reports a refused client certificate only on the first read.
	if _, err := c.Read(make([]byte, 1)); err != nil {
		return nil, err
	}
	return c.ConnectionState().PeerCertificates[0], nil
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	tmp := to + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, to); err != nil {
		t.Fatal(err)
	}
}

func TestServerConfigReloadsCertificate(t *testing.T) {
	ca1, cert1, key1, err := GenerateTestPKI(filepath.Join(t.TempDir(), "one"))
	if err != nil {
		t.Fatal(err)
	}
	ca2, cert2, key2, err := GenerateTestPKI(filepath.Join(t.TempDir(), "two"))
	if err != nil {
		t.Fatal(err)
	}
	live := t.TempDir()
	cert, key := filepath.Join(live, "tls.crt"), filepath.Join(live, "tls.key")
	copyFile(t, cert1, cert)
	copyFile(t, key1, key)
	cfg, err := ServerConfig(cert, key, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 {
		t.Fatalf("MinVersion %x", cfg.MinVersion)
	}
	addr := serveTLS(t, cfg)
	bundle := filepath.Join(t.TempDir(), "cas.pem")
	b1, _ := os.ReadFile(ca1)
	b2, _ := os.ReadFile(ca2)
	if err := os.WriteFile(bundle, append(b1, b2...), 0o644); err != nil {
		t.Fatal(err)
	}
	ccfg, err := ClientConfig(bundle, "", "", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	issuer := func() string {
		t.Helper()
		leaf, err := handshake(addr, ccfg.Clone())
		if err != nil {
			t.Fatal(err)
		}
		return leaf.SerialNumber.String()
	}
	first := issuer()

	// A half-done rotation (new certificate, old key) keeps the old pair:
	// handshakes serve it until the reloader has seen the new certificate
	// and refused it (its warning is the sign), and after.
	var logs syncbuf.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	copyFile(t, cert2, cert)
	for deadline := time.Now().Add(3*ReloadCheckInterval + 5*time.Second); !strings.Contains(logs.String(), "does not load"); time.Sleep(100 * time.Millisecond) {
		if got := issuer(); got != first {
			t.Fatalf("mismatched pair served: %s", got)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reloader never refused the half-done rotation; its log: %q", logs.String())
		}
	}
	if got := issuer(); got != first {
		t.Fatalf("mismatched pair served after the refusal: %s", got)
	}
	copyFile(t, key2, key)
	deadline := time.Now().Add(5 * time.Second)
	for issuer() == first {
		if time.Now().After(deadline) {
			t.Fatal("new certificate not served within 5s")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key, err := GenerateTestPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ServerConfig(cert, key, ca)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Fatalf("ClientAuth = %v", cfg.ClientAuth)
	}
	addr := serveTLS(t, cfg)
	ccert, ckey, err := IssueClientCert(dir, "ironlink-agent-site-a")
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(ckey)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("client key mode %v", fi.Mode().Perm())
	}
	with, err := ClientConfig(ca, ccert, ckey, "")
	if err != nil {
		t.Fatal(err)
	}
	with.ServerName = "127.0.0.1"
	if _, err := handshake(addr, with); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	without, _ := ClientConfig(ca, "", "", "localhost")
	if _, err := handshake(addr, without); err == nil {
		t.Fatal("handshake without a client certificate succeeded")
	}
	// A certificate from another CA is refused too.
	other := t.TempDir()
	if _, _, _, err := GenerateTestPKI(other); err != nil {
		t.Fatal(err)
	}
	ocert, okey, _ := IssueClientCert(other, "ironlink-agent-site-a")
	foreign, _ := ClientConfig(ca, ocert, okey, "localhost")
	if _, err := handshake(addr, foreign); err == nil {
		t.Fatal("client certificate of a foreign CA accepted")
	}
}

func TestServerNameVerified(t *testing.T) {
	ca, cert, key, err := GenerateTestPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := ServerConfig(cert, key, "")
	addr := serveTLS(t, cfg)
	ccfg, _ := ClientConfig(ca, "", "", "hub.elsewhere.example")
	if _, err := handshake(addr, ccfg); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("wrong server name accepted: %v", err)
	}
	sys, _ := ClientConfig("", "", "", "localhost") // system roots do not know the test CA
	if _, err := handshake(addr, sys); err == nil {
		t.Fatal("test CA trusted by the system roots")
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key, err := GenerateTestPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func() error{
		"missing cert":      func() error { _, err := ServerConfig(filepath.Join(dir, "nope.pem"), key, ""); return err },
		"key of other cert": func() error { _, err := ServerConfig(cert, filepath.Join(dir, CAKeyFile), ""); return err },
		"bad client CA":     func() error { _, err := ServerConfig(cert, key, key); return err },
		"cert without key":  func() error { _, err := ClientConfig(ca, cert, "", ""); return err },
		"bad server CA":     func() error { _, err := ClientConfig(filepath.Join(dir, "nope.pem"), "", "", ""); return err },
		"client cert bad":   func() error { _, err := ClientConfig(ca, ca, key, ""); return err },
	} {
		if f() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, _, err := IssueClientCert(t.TempDir(), "x"); err == nil {
		t.Error("IssueClientCert without a CA succeeded")
	}
}

// TestKeyPairOfTheWrongFile: a certificate or key path pointing at a device
// that never ends is refused at once with its name; the pair was read with
// tls.LoadX509KeyPair, without a limit, so `ironlink-hub --tls-cert
// /dev/zero` read until it ran out of memory.
func TestKeyPairOfTheWrongFile(t *testing.T) {
	dir := t.TempDir()
	_, cert, key, err := GenerateTestPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func() error{
		"server cert": func() error { _, err := ServerConfig("/dev/zero", key, ""); return err },
		"server key":  func() error { _, err := ServerConfig(cert, "/dev/zero", ""); return err },
		"client cert": func() error { _, err := ClientConfig("", "/dev/zero", key, ""); return err },
	} {
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "/dev/zero") || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s /dev/zero: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s /dev/zero: still reading after 10 s", name)
		}
	}
}

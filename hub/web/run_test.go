package web

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/tlsutil"
	"github.com/ironlink/ironlink/test/harness"
)

// runServer runs s.Run until the test ends.
func runServer(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func waitFor(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func get(t *testing.T, c *http.Client, u string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDemoProxyOverUnixSocket runs the view as make demo does: proxy mode
// on a unix socket (mode 0600) behind the token proxy.
func TestDemoProxyOverUnixSocket(t *testing.T) {
	e := newEnv(t)
	dir, err := os.MkdirTemp("", "ilweb") // short: unix socket paths are limited to 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "web.sock")
	runServer(t, e.server(t, Config{Addr: "unix:" + sock, Auth: AuthProxy}))
	waitFor(t, func() error { _, err := os.Stat(sock); return err })
	if fi, _ := os.Stat(sock); fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want 0600", fi.Mode().Perm())
	}
	token := "0123456789abcdef-demo"
	base := serveDemoProxy(t, &DemoProxy{Upstream: "unix:" + sock, User: "ops-read", Token: token})
	plain := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		code       int
		body       string
	}{
		{name: "no token", path: "/", code: 401, body: "not signed in"},
		{name: "a user header alone does not sign in", path: "/", hdr: map[string]string{"X-Forwarded-User": "ops-write"}, code: 401},
		{name: "wrong token", path: "/?token=guess", code: 401, body: "wrong demo token"},
		{name: "wrong cookie", path: "/", hdr: map[string]string{"Cookie": DemoProxyCookie + "=guess"}, code: 401},
		{name: "right token redirects without it", path: "/devices?token=" + token + "&site=alpha", code: 303},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, plain, base+tc.path, tc.hdr)
			if code != tc.code || !strings.Contains(body, tc.body) {
				t.Fatalf("%d %q, want %d containing %q", code, body, tc.code, tc.body)
			}
		})
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	// The token once; then the cookie. A forged header is replaced by the
	// proxy's user: ops-read stays read-only.
	code, body := get(t, browser, base+"/devices/"+e.ids["alpha"][0]+"?token="+token, map[string]string{"X-Forwarded-User": "ops-write"})
	if code != 200 || !strings.Contains(body, `id="who">ops-read`) || strings.Contains(body, "quarantine-btn") {
		t.Fatalf("signed in: %d, want ops-read without buttons:\n%.400s", code, body)
	}
	if code, _ := get(t, browser, base+"/", map[string]string{"X-Auth-Request-User": "ops-write"}); code != 200 {
		t.Fatalf("with the cookie: %d", code)
	}
}

// TestRunMTLS serves over TLS with the hub's certificate and authenticates
// by the client certificate's key (no CA involved), health without one.
func TestRunMTLS(t *testing.T) {
	e := newEnv(t)
	ca, cert, key, err := tlsutil.GenerateTestPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	addr := harness.FreeAddr(t)
	runServer(t, e.server(t, Config{Addr: addr, Auth: AuthMTLS, TLSCert: cert, TLSKey: key}))
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs, ServerName: "localhost"}}}
	}
	base := "https://" + addr
	waitFor(t, func() error { _, err := client().Get(base + "/healthz"); return err })
	if code, _ := get(t, client(), base+"/healthz", nil); code != 200 {
		t.Fatalf("health without a certificate: %d", code)
	}
	for _, path := range []string{"/healthz", "/"} { // refusals too: HSTS on every answer over TLS
		resp, err := client().Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Strict-Transport-Security"); got != HSTS {
			t.Fatalf("GET %s over TLS: Strict-Transport-Security %q, want %q", path, got, HSTS)
		}
	}
	if code, body := get(t, client(), base+"/", nil); code != 401 {
		t.Fatalf("no certificate: %d %s", code, body)
	}
	if code, body := get(t, client(selfSigned(t, e.ops["ops-write"], time.Now().Add(time.Hour))), base+"/", nil); code != 200 || !strings.Contains(body, `id="who">ops-write`) {
		t.Fatalf("operator certificate: %d %.300s", code, body)
	}
	// A trusted proxy header means nothing in mtls mode.
	if code, _ := get(t, client(), base+"/", map[string]string{DefaultUserHeader: "ops-write"}); code != 401 {
		t.Fatalf("proxy header in mtls mode: %d, want 401", code)
	}
}

// TestDemoProxyFallsBackToAnotherReplica: with DEMO_REPLICAS=2 the token
// proxy names every replica's view; when the first replica is gone (its
// socket left behind by kill -9, or removed) the next one serves, and when
// none answers the 502 says where it looked and what to check.
func TestDemoProxyFallsBackToAnotherReplica(t *testing.T) {
	e := newEnv(t)
	dir, err := os.MkdirTemp("", "ilweb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	dead := filepath.Join(dir, "web-hub-1.sock")
	l, err := net.Listen("unix", dead)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // a socket file nobody listens on, as a killed hub leaves it
	sock := filepath.Join(dir, "web-hub-2.sock")
	runServer(t, e.server(t, Config{Addr: "unix:" + sock, Auth: AuthProxy}))
	waitFor(t, func() error { _, err := os.Stat(sock); return err })
	token := "0123456789abcdef-demo"
	base := serveDemoProxy(t, &DemoProxy{Upstream: "unix:" + dead, Fallbacks: []string{"unix:" + filepath.Join(dir, "gone.sock"), "unix:" + sock}, User: "ops-read", Token: token})
	if code, body := get(t, signedIn(t, base, token), base+"/", nil); code != 200 || !strings.Contains(body, `id="who">ops-read`) {
		t.Fatalf("first replica down: %d, want the second's view:\n%.300s", code, body)
	}
	base = serveDemoProxy(t, &DemoProxy{Upstream: "unix:" + dead, User: "ops-read", Token: token})
	if code, body := get(t, signedIn(t, base, token), base+"/", nil); code != 502 || !strings.Contains(body, "does not answer at unix:"+dead) || !strings.Contains(body, "is the hub running?") {
		t.Fatalf("no replica up: %d %q, want 502 naming the socket", code, body)
	}
	if _, err := (&DemoProxy{Upstream: "unix:" + sock, Fallbacks: []string{"ftp://x"}, User: "u", Token: token}).Handler(); err == nil {
		t.Fatal("a bad fallback was accepted")
	}
}

// signedIn returns a browser (cookie jar, redirects not followed) that has
// signed in to the demo proxy at base with token.
func signedIn(t *testing.T, base, token string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if code, body := get(t, c, base+"/?token="+token, nil); code != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", code, body)
	}
	return c
}

// serveDemoProxy serves p on a free loopback port until the test ends and
// returns its base URL once it answers.
func serveDemoProxy(t *testing.T, p *DemoProxy) string {
	t.Helper()
	h, err := p.Handler()
	if err != nil {
		t.Fatal(err)
	}
	addr := harness.FreeAddr(t)
	ps := &http.Server{Addr: addr, Handler: h}
	go func() { _ = ps.ListenAndServe() }()
	t.Cleanup(func() { ps.Close() })
	waitFor(t, func() error { _, err := http.Get("http://" + addr + "/"); return err })
	return "http://" + addr
}

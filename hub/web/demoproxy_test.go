package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// demoRequest runs one request through a demo proxy handler (upstream never
// reached: the cases here are all answered by the proxy itself) from
// remote, with cookie (name=value) when not empty.
func demoRequest(t *testing.T, h http.Handler, target, remote, cookie string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("GET", target, nil)
	r.RemoteAddr = remote
	if cookie != "" {
		r.Header.Set("Cookie", cookie)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// The sign-in redirect stays on this host, the cookie carries a random
// session value rather than the token and is not kept for 30 days, and
// only loopback clients are served.
func TestDemoProxySignInIsLocal(t *testing.T) {
	const token = "0123456789abcdef-demo"
	h, err := (&DemoProxy{Upstream: "http://127.0.0.1:1", User: "ops-read", Token: token}).Handler()
	if err != nil {
		t.Fatal(err)
	}
	const local = "127.0.0.1:5000"
	for _, tc := range []struct{ target, want string }{
		{"//evil.example/x?token=" + token, "/"},
		{"//evil.example/x?token=" + token + "&site=a", "/?site=a"},
		{"/\\evil.example?token=" + token, "/%5Cevil.example"},
		{"/devices?token=" + token + "&site=a", "/devices?site=a"},
	} {
		w := demoRequest(t, h, tc.target, local, "")
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != tc.want {
			t.Errorf("GET %s: %d Location %q, want 303 to %q", tc.target, w.Code, w.Header().Get("Location"), tc.want)
		}
	}

	w := demoRequest(t, h, "/?token="+token, local, "")
	cookies := w.Result().Cookies()
	if len(cookies) != 1 || cookies[0].Name != DemoProxyCookie {
		t.Fatalf("sign-in cookies %v", cookies)
	}
	c := cookies[0]
	if c.Value == token || strings.Contains(c.Value, token) || len(c.Value) < 20 {
		t.Fatalf("cookie value %q: the token itself, or too short for a random session", c.Value)
	}
	if c.MaxAge != 0 || !c.Expires.IsZero() || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie %+v: want a browser-session, HttpOnly, SameSite=Strict cookie", c)
	}
	if again := demoRequest(t, h, "/?token="+token, local, "").Result().Cookies()[0].Value; again == c.Value {
		t.Fatal("two sign-ins got the same session value")
	}
	// The raw token in a cookie signs nobody in; the session does (the
	// upstream is down, so a signed-in request ends in 502, not 401).
	if w := demoRequest(t, h, "/", local, DemoProxyCookie+"="+token); w.Code != http.StatusUnauthorized {
		t.Fatalf("the token as the cookie: %d, want 401", w.Code)
	}
	if w := demoRequest(t, h, "/", local, DemoProxyCookie+"="+c.Value); w.Code != http.StatusBadGateway {
		t.Fatalf("the session cookie: %d, want 502 from the (absent) upstream", w.Code)
	}

	for _, remote := range []string{"192.0.2.7:5000", "[2001:db8::1]:5000"} {
		if w := demoRequest(t, h, "/?token="+token, remote, ""); w.Code != http.StatusForbidden || len(w.Result().Cookies()) != 0 {
			t.Fatalf("sign-in from %s: %d, want 403 without a session", remote, w.Code)
		}
	}
	if w := demoRequest(t, h, "/", "[::1]:5000", DemoProxyCookie+"="+c.Value); w.Code != http.StatusBadGateway {
		t.Fatalf("from ::1: %d, want served", w.Code)
	}
}

func TestCheckLoopbackListen(t *testing.T) {
	for _, a := range []string{"127.0.0.1:7080", "[::1]:7080", "localhost:7080", "127.0.0.2:1"} {
		if err := CheckLoopbackListen(a); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	for _, a := range []string{":7080", "0.0.0.0:7080", "[::]:7080", "192.0.2.1:7080", "example.com:7080", "7080"} {
		if err := CheckLoopbackListen(a); err == nil {
			t.Errorf("%s accepted", a)
		}
	}
}

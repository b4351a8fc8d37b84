package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
)

// DemoProxyCookie holds the browser's session once it has presented the
// demo token: a random value the proxy maps to a signed-in session in its
// memory, never the token itself.
const DemoProxyCookie = "ironlink_demo_session"

// Demo proxy session limits.
const (
	// DemoSessionTTL is how long a session lasts after sign-in; the cookie
	// is a browser-session cookie (no Max-Age), so it also ends when the
	// browser closes.
	DemoSessionTTL = 12 * time.Hour
	// demoMaxSessions bounds the sessions kept: signing in beyond it drops
	// the oldest.
	demoMaxSessions = 1000
)

// DemoProxy is the smallest authenticating proxy that fits AuthProxy mode,
// for `make demo` and local use: it stands for oauth2-proxy. A browser
// proves itself once with a secret token in the URL (as Jupyter does),
// gets a random session value (not the token) in an HttpOnly,
// SameSite=Strict browser-session cookie that the proxy honours for
// DemoSessionTTL, and is redirected to the same local path without the
// token (never to another host: a path such as //other.host/ becomes /).
// Every request carrying a live session is forwarded to the fleet view
// with Header naming User; a client-supplied Header (or
// X-Auth-Request-User) is removed first. Everything else gets 401, and a
// request from a non-loopback address 403 (see CheckLoopbackListen for the
// listening side). It is not meant for production: there, use an
// identity-aware proxy in front of the hub (docs/reference/web.md).
type DemoProxy struct {
	// Upstream is the fleet view: unix:PATH or http://host:port.
	Upstream string
	// Fallbacks are further fleet views (unix:PATH or http://host:port,
	// other replicas': the view is stateless), tried in order for a new
	// connection when Upstream does not accept one, so that the view
	// outlives one replica.
	Fallbacks []string
	// User is the roster client id every authenticated request is forwarded as.
	User string
	// Token is the secret the browser must present (at least 16 bytes).
	Token string
	// Header is the user header (default DefaultUserHeader).
	Header string
}

// Handler returns the proxy. Errors: a bad Upstream, an empty User, a short Token.
func (p *DemoProxy) Handler() (http.Handler, error) {
	if p.User == "" {
		return nil, errors.New("demo proxy: no user (--user)")
	}
	if len(p.Token) < 16 {
		return nil, errors.New("demo proxy: the token must be at least 16 bytes (--token-file)")
	}
	header := p.Header
	if header == "" {
		header = DefaultUserHeader
	}
	type dest struct{ network, addr string }
	var dests []dest
	target := &url.URL{Scheme: "http", Host: "fleet-view"}
	upstreams := append([]string{p.Upstream}, p.Fallbacks...)
	for i, up := range upstreams {
		if path, ok := strings.CutPrefix(up, "unix:"); ok {
			dests = append(dests, dest{"unix", path})
			continue
		}
		u, err := url.Parse(up)
		if err != nil || u.Scheme != "http" || u.Host == "" || i > 0 && strings.Trim(u.Path, "/") != "" {
			return nil, fmt.Errorf("demo proxy: upstream %q is neither unix:PATH nor http://host:port", up)
		}
		addr := u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), "80")
		}
		dests = append(dests, dest{"tcp", addr})
		if i == 0 {
			target.Path = u.Path
		}
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var errs []error
		for _, d := range dests {
			var dl net.Dialer
			c, err := dl.DialContext(ctx, d.network, d.addr)
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
		}
		return nil, errors.Join(errs...)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host // the view's cross-origin check compares Origin with Host
			pr.Out.Header.Del("X-Auth-Request-User")
			pr.Out.Header.Del(header)
			pr.Out.Header.Set(header, p.User)
			// The token stays here: strip the cookie before forwarding.
			pr.Out.Header.Del("Cookie")
			for _, c := range pr.In.Cookies() {
				if c.Name != DemoProxyCookie {
					pr.Out.AddCookie(c)
				}
			}
		},
		Transport: transport,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, fmt.Sprintf("the fleet view does not answer at %s: is the hub running? (make demo: see .demo/hub*.log)\n%v",
				strings.Join(upstreams, ", "), err), http.StatusBadGateway)
		},
	}
	ok := func(s string) bool { return subtle.ConstantTimeCompare([]byte(s), []byte(p.Token)) == 1 }
	sessions := &demoSessions{live: map[string]time.Time{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackRemote(r.RemoteAddr) {
			http.Error(w, "the demo proxy serves loopback clients only", http.StatusForbidden)
			return
		}
		if t := r.URL.Query().Get("token"); t != "" {
			if !ok(t) {
				http.Error(w, "wrong demo token: open the URL that make demo printed", http.StatusUnauthorized)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: DemoProxyCookie, Value: sessions.start(time.Now()), Path: "/", HttpOnly: true,
				SameSite: http.SameSiteStrictMode})
			q := r.URL.Query()
			q.Del("token")
			http.Redirect(w, r, localTarget(r.URL.EscapedPath(), q.Encode()), http.StatusSeeOther)
			return
		}
		if c, err := r.Cookie(DemoProxyCookie); err != nil || !sessions.valid(c.Value, time.Now()) {
			http.Error(w, "not signed in: open the fleet view URL that make demo printed (it carries the demo token)", http.StatusUnauthorized)
			return
		}
		rp.ServeHTTP(w, r)
	}), nil
}

// demoSessions are the proxy's signed-in browsers: random session value →
// expiry.
type demoSessions struct {
	mu   sync.Mutex
	live map[string]time.Time
}

// start records a new session valid for DemoSessionTTL from now and
// returns its value (128 random bits, base32).
func (d *demoSessions) start(now time.Time) string {
	id := rand.Text()
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, exp := range d.live {
		if !now.Before(exp) {
			delete(d.live, k)
		}
	}
	for len(d.live) >= demoMaxSessions { // drop the one closest to expiry
		oldest, first := "", time.Time{}
		for k, exp := range d.live {
			if oldest == "" || exp.Before(first) {
				oldest, first = k, exp
			}
		}
		delete(d.live, oldest)
	}
	d.live[id] = now.Add(DemoSessionTTL)
	return id
}

// valid reports whether id is a live session at now.
func (d *demoSessions) valid(id string, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	exp, ok := d.live[id]
	return ok && now.Before(exp)
}

// localTarget is the redirect target after sign-in: path (escaped) when it
// is a path on this host, else "/", with query when not empty. A path that
// starts with // or /\ would be taken by a browser as another host
// (RFC 3986 §4.2 network-path reference), so it becomes "/".
func localTarget(path, query string) string {
	if !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "//") || strings.HasPrefix(path, "/\\") {
		path = "/"
	}
	if query != "" {
		path += "?" + query
	}
	return path
}

// loopbackRemote reports whether remote (a Request.RemoteAddr, host:port)
// is a loopback address.
func loopbackRemote(remote string) bool {
	ap, err := netip.ParseAddrPort(remote)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// CheckLoopbackListen returns an error unless addr (host:port) names a
// loopback address (127.0.0.0/8, ::1 or localhost): the demo proxy must
// not be reachable from other hosts, whatever its token.
func CheckLoopbackListen(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("demo proxy: listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
		return nil
	}
	return fmt.Errorf("demo proxy: listen address %q is not a loopback address (127.0.0.1, ::1, localhost): the demo proxy is for this machine only", addr)
}

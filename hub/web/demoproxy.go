package web

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"
)

// DemoProxyCookie holds the demo token once the browser has presented it.
const DemoProxyCookie = "ironlink_demo_token"

// DemoProxy is the smallest authenticating proxy that fits AuthProxy mode,
// for `make demo` and local use: it stands for oauth2-proxy. A browser
// proves itself once with a secret token in the URL (as Jupyter does),
// gets it back as an HttpOnly, SameSite=Strict cookie, and every request
// carrying it is forwarded to the fleet view with Header naming User; a
// client-supplied Header (or X-Auth-Request-User) is removed first.
// Everything else gets 401. It is not meant for production: there, use an
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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t := r.URL.Query().Get("token"); t != "" {
			if !ok(t) {
				http.Error(w, "wrong demo token: open the URL that make demo printed", http.StatusUnauthorized)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: DemoProxyCookie, Value: p.Token, Path: "/", HttpOnly: true,
				SameSite: http.SameSiteStrictMode, MaxAge: int((30 * 24 * time.Hour).Seconds())})
			q := r.URL.Query()
			q.Del("token")
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		if c, err := r.Cookie(DemoProxyCookie); err != nil || !ok(c.Value) {
			http.Error(w, "not signed in: open the fleet view URL that make demo printed (it carries the demo token)", http.StatusUnauthorized)
			return
		}
		rp.ServeHTTP(w, r)
	}), nil
}

package web

import (
	"context"
	"crypto/tls"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/fleet"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/tlsutil"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// FragmentHeader, sent on a GET, asks for the page's live region only (the
// script's periodic refresh and the command progress poll send it).
const FragmentHeader = "X-Ironlink-Fragment"

// Page limits.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
	historyLimit    = 200
	commandsShown   = 10
	maxSearchBytes  = 200
)

// Server is the fleet view. Create it with New; it is safe for concurrent use.
type Server struct {
	cfg    Config
	fleet  *fleet.Server
	store  Store
	roster func() *auth.Roster
	log    *slog.Logger
	pages  map[string]*template.Template
	mux    http.Handler
	now    func() time.Time
	ops    Operations  // node actions (SetOperations); nil: none offered
	policy Policy      // policy API (SetPolicy); nil: no policy pages
	rem    Remediation // remediation API (SetRemediation); nil: no Remediation section
	// patterns are the mux patterns of every page and action (routes), in
	// registration order: what the inventory test checks Inventory against.
	patterns []string
}

// New returns the fleet view over fl (the hub's FleetService handlers) and
// st (for the read-only queries fl has no RPC for), authenticating callers
// against roster() at each request (so roster reloads apply at once).
// cfg must have passed Validate. Errors: cfg invalid, templates broken.
func New(cfg Config, fl *fleet.Server, st Store, roster func() *auth.Roster, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, fleet: fl, store: st, roster: roster, log: log, now: time.Now, pages: map[string]*template.Template{}}
	for _, p := range []string{"overview", "devices", "device", "command", "error", "bulk", "bulkdone", "site",
		"operations", "operation", "commands", "policy", "holds", "handoffs", "validation", "hardware", "replay", "events"} {
		t, err := template.New(p).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("web: template %s: %w", p, err)
		}
		s.pages[p] = t
	}
	assets, err := fs.Sub(assetFS, "assets")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	files := http.StripPrefix("/assets/", http.FileServerFS(assets))
	mux.Handle("GET /assets/", s.authed(func(w http.ResponseWriter, r *http.Request, _ Identity) {
		w.Header().Set("Cache-Control", "private, max-age=3600")
		files.ServeHTTP(w, r)
	}))
	s.routes(mux)
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.log.Warn("cross-origin request refused", "method", r.Method, "path", r.URL.Path, "origin", r.Header.Get("Origin"))
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
	}))
	s.mux = securityHeaders(cop.Handler(mux))
	return s, nil
}

// Handler returns the view's HTTP handler (for tests and embedding).
func (s *Server) Handler() http.Handler { return s.mux }

// Run listens on cfg.Addr and serves until ctx ends, then shuts down
// (5 s grace). Errors: the address cannot be listened on, TLS files bad.
func (s *Server) Run(ctx context.Context) error {
	lis, err := s.listen()
	if err != nil {
		return err
	}
	unix := s.cfg.unixPath() != ""
	hs := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, unixConnKey, unix)
		},
	}
	scheme := "http"
	if !unix && !s.cfg.Plaintext {
		tc, err := tlsutil.ServerConfig(s.cfg.TLSCert, s.cfg.TLSKey, "")
		if err != nil {
			lis.Close()
			return fmt.Errorf("web TLS: %w", err)
		}
		if s.cfg.Auth == AuthMTLS {
			// Asked for, not required, so /healthz answers without one;
			// every other path refuses a request without a certificate. The
			// roster, not a CA, decides whose certificate counts.
			tc.ClientAuth = tls.RequestClientCert
		}
		lis = tls.NewListener(lis, tc)
		scheme = "https"
	}
	s.log.Info("fleet view serving", "addr", s.cfg.Addr, "scheme", scheme, "auth", s.cfg.Auth)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(lis) }()
	select {
	case err := <-errc:
		return fmt.Errorf("web: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	if unix {
		_ = os.Remove(s.cfg.unixPath())
	}
	return nil
}

func (s *Server) listen() (net.Listener, error) {
	if p := s.cfg.unixPath(); p != "" {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(p) // a socket left by a killed hub
		}
		lis, err := net.Listen("unix", p)
		if err != nil {
			return nil, fmt.Errorf("web: listen on %s: %w", s.cfg.Addr, err)
		}
		if err := os.Chmod(p, 0o600); err != nil {
			lis.Close()
			return nil, fmt.Errorf("web: chmod %s: %w", p, err)
		}
		return lis, nil
	}
	lis, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("web: listen on %s: %w", s.cfg.Addr, err)
	}
	return lis, nil
}

// HSTS is the Strict-Transport-Security value (RFC 6797) the view sends on
// every answer over TLS: browsers keep to https for this host for a year.
// No includeSubDomains: the view does not own its parent domain's hosts.
const HSTS = "max-age=31536000"

// securityHeaders sets a strict content security policy (only this origin's
// scripts and styles, no framing) and friends on every answer, and HSTS on
// those served over TLS (never over plain HTTP, where RFC 6797 §7.2 says
// it must be ignored, nor on the unix socket behind a proxy).
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		if r.TLS != nil {
			hd.Set("Strict-Transport-Security", HSTS)
		}
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("X-Frame-Options", "DENY")
		h.ServeHTTP(w, r)
	})
}

// authed authenticates the request and passes the identity on in the
// context; refusals get a plain page with the reason.
func (s *Server) authed(h func(http.ResponseWriter, *http.Request, Identity)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, aerr := s.authenticate(r)
		if aerr != nil {
			s.log.Info("fleet view request refused", "path", r.URL.Path, "remote", r.RemoteAddr, "code", aerr.code, "why", aerr.msg)
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, aerr.msg, aerr.code)
			return
		}
		w.Header().Set("Cache-Control", "no-store") // pages; assets override it
		h(w, r.WithContext(context.WithValue(r.Context(), identityKey, id)), id)
	})
}

// apiContext carries the caller's roster identity the way the gRPC
// interceptors do, so fleet records the client id as the actor and binds
// the caller to its roster sites (authn.SiteScope) as it does over gRPC.
func apiContext(ctx context.Context, id Identity) context.Context {
	return authn.NewContext(ctx, auth.Identity{ClientID: id.ClientID, Scopes: id.Scopes, KeyID: id.KeyID, Sites: id.Sites})
}

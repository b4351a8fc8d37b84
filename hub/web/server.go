package web

import (
	"bytes"
	"context"
	"crypto/tls"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/fleet"
	hubstatus "github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/sitename"
	"github.com/ironlink/ironlink/internal/textcheck"
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
	for _, p := range []string{"overview", "devices", "device", "command", "error"} {
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
	mux.Handle("GET /{$}", s.authed(s.overview))
	mux.Handle("GET /devices", s.authed(s.devices))
	mux.Handle("GET /devices/{id}", s.authed(s.device))
	mux.Handle("POST /devices/{id}/quarantine", s.authed(s.impair(store.ImpairmentQuarantined)))
	mux.Handle("POST /devices/{id}/release", s.authed(s.impair(store.ImpairmentReleased)))
	mux.Handle("GET /commands/{id}", s.authed(s.command))
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

// securityHeaders sets a strict content security policy (only this origin's
// scripts and styles, no framing) and friends on every answer.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
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

// page is what every template gets.
type page struct {
	Title   string
	Who     Identity
	Refresh int // seconds
	Path    string
	Data    any
}

func isFragment(r *http.Request) bool { return r.Header.Get(FragmentHeader) != "" }

// render writes page p (or only its "live" region for a fragment request).
func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name, title string, data any) {
	id, _ := identityFrom(r.Context())
	pg := page{Title: title, Who: id, Refresh: int(s.cfg.Refresh / time.Second), Path: r.URL.RequestURI(), Data: data}
	tmpl := "layout"
	if isFragment(r) {
		tmpl = "live"
	}
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, tmpl, pg); err != nil {
		s.log.Error("render", "page", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// fail renders the error page with code and msg.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	s.render(w, r, code, "error", http.StatusText(code), map[string]any{"Code": code, "Message": msg})
}

// apiFail maps a FleetService error to an HTTP answer.
func (s *Server) apiFail(w http.ResponseWriter, r *http.Request, err error) {
	st, _ := status.FromError(err)
	code := http.StatusInternalServerError
	switch st.Code() {
	case codes.InvalidArgument:
		code = http.StatusBadRequest
	case codes.NotFound:
		code = http.StatusNotFound
	case codes.PermissionDenied:
		code = http.StatusForbidden
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		code = http.StatusServiceUnavailable
	default:
		s.log.Error("fleet call failed", "path", r.URL.Path, "err", err)
	}
	s.fail(w, r, code, st.Message())
}

func (s *Server) dbFail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	s.log.Error("fleet view query failed", "path", r.URL.Path, "err", err)
	s.fail(w, r, http.StatusServiceUnavailable, "database unavailable; retry")
}

// ---- the fleet at a glance ----

type matrixCell struct {
	N    int
	Href string
}

type matrixRow struct {
	Site  string
	Href  string
	Cells []matrixCell
	Total int
}

type siteView struct {
	Site     *ironlinkv1.Site
	Href     string
	Stale    bool
	LinkText string
}

type overviewData struct {
	Statuses []hubstatus.Status
	Rows     []matrixRow
	Totals   matrixRow
	Sites    []siteView
}

func devicesHref(site string, st hubstatus.Status) string {
	v := url.Values{}
	if site != "" {
		v.Set("site", site)
	}
	if st != "" {
		v.Set("status", string(st))
	}
	if len(v) == 0 {
		return "/devices"
	}
	return "/devices?" + v.Encode()
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request, id Identity) {
	ctx := apiContext(r.Context(), id)
	sites, err := s.fleet.ListSites(ctx, &ironlinkv1.ListSitesRequest{})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	counts, err := countBySiteStatus(ctx, s.store.Pool(), id.Sites)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	d := overviewData{Statuses: hubstatus.All}
	idx := map[hubstatus.Status]int{}
	for i, st := range hubstatus.All {
		idx[st] = i
	}
	bySite := map[string][]int{}
	var names []string
	for _, st := range sites.GetSites() {
		names = append(names, st.GetName())
	}
	for _, c := range counts {
		if _, ok := bySite[c.Site]; !ok {
			bySite[c.Site] = make([]int, len(hubstatus.All))
			if !slices.Contains(names, c.Site) {
				names = append(names, c.Site)
			}
		}
		if i, ok := idx[c.Status]; ok {
			bySite[c.Site][i] += c.N
		}
	}
	slices.Sort(names)
	d.Totals = matrixRow{Site: "all sites", Href: devicesHref("", ""), Cells: make([]matrixCell, len(hubstatus.All))}
	for i, st := range hubstatus.All {
		d.Totals.Cells[i].Href = devicesHref("", st)
	}
	for _, name := range names {
		row := matrixRow{Site: name, Href: devicesHref(name, "")}
		for i, st := range hubstatus.All {
			n := 0
			if c := bySite[name]; c != nil {
				n = c[i]
			}
			row.Cells = append(row.Cells, matrixCell{N: n, Href: devicesHref(name, st)})
			row.Total += n
			d.Totals.Cells[i].N += n
		}
		d.Totals.Total += row.Total
		d.Rows = append(d.Rows, row)
	}
	for _, st := range sites.GetSites() {
		v := siteView{Site: st, Href: devicesHref(st.GetName(), "")}
		switch st.GetLinkState() {
		case ironlinkv1.LinkState_LINK_STATE_CONNECTED:
			v.LinkText = "connected"
		case ironlinkv1.LinkState_LINK_STATE_DISCONNECTED:
			v.LinkText = "disconnected"
		case ironlinkv1.LinkState_LINK_STATE_UNREACHABLE:
			v.LinkText, v.Stale = "unreachable", true
		}
		d.Sites = append(d.Sites, v)
	}
	s.render(w, r, http.StatusOK, "overview", "Fleet", d)
}

// ---- the device list ----

type option struct {
	Value, Label string
	Selected     bool
}

type devicesData struct {
	Filter    listFilter
	Sites     []option
	Statuses  []option
	Imps      []option
	Rows      []listRow
	Total     int
	NextHref  string
	FirstHref string
	Query     string // the filter as a query string, without the cursor
}

// parseListFilter reads the device list's query: site, status (repeatable,
// e.g. FAULTED), impairment (QUARANTINED, RELEASED, NONE; repeatable),
// orphaned=1, removed=1, q (name search), after (cursor), size.
func parseListFilter(q url.Values) (listFilter, error) {
	f := listFilter{Site: strings.TrimSpace(q.Get("site")), Name: strings.TrimSpace(q.Get("q")), Limit: defaultPageSize,
		InstanceMismatch: q.Get("orphaned") != "", IncludeRemoved: q.Get("removed") != ""}
	if f.Site != "" && !sitename.Valid(f.Site) {
		return f, fmt.Errorf("site %q is not a valid site name", f.Site)
	}
	// Length, UTF-8 and control characters: PostgreSQL refuses NUL and
	// invalid UTF-8 in text, which would answer 503 as if it were down.
	if err := textcheck.Line("search", f.Name, maxSearchBytes); err != nil {
		return f, err
	}
	for _, v := range q["status"] {
		for _, one := range strings.Split(v, ",") {
			st := hubstatus.Status(strings.ToUpper(strings.TrimSpace(one)))
			if st == "" {
				continue
			}
			if !st.Valid() {
				return f, fmt.Errorf("status %q is not an operational status", one)
			}
			f.Statuses = append(f.Statuses, st)
		}
	}
	for _, v := range q["impairment"] {
		im := store.Impairment(strings.ToUpper(strings.TrimSpace(v)))
		switch im {
		case "":
		case store.ImpairmentNone, store.ImpairmentQuarantined, store.ImpairmentReleased:
			f.Impairments = append(f.Impairments, im)
		default:
			return f, fmt.Errorf("impairment %q is not QUARANTINED, RELEASED or NONE", v)
		}
	}
	if a := q.Get("after"); a != "" {
		u, err := uuid.Parse(a)
		if err != nil {
			return f, fmt.Errorf("after %q is not a device id", a)
		}
		f.After = u.String()
	}
	if sz := q.Get("size"); sz != "" {
		n, err := strconv.Atoi(sz)
		if err != nil || n < 1 || n > maxPageSize {
			return f, fmt.Errorf("size %q is outside 1-%d", sz, maxPageSize)
		}
		f.Limit = n
	}
	return f, nil
}

func (s *Server) devices(w http.ResponseWriter, r *http.Request, id Identity) {
	q := r.URL.Query()
	f, err := parseListFilter(q)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ctx := apiContext(r.Context(), id)
	if sc := authn.CallerScope(ctx); f.Site != "" && !sc.Allows(f.Site) {
		s.apiFail(w, r, sc.Deny(ctx, s.log, "site "+f.Site, f.Site))
		return
	}
	f.Sites = id.Sites
	rows, more, err := listDevices(ctx, s.store.Pool(), f)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	total, err := countDevices(ctx, s.store.Pool(), f)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	sites, err := siteNames(ctx, s.store.Pool(), id.Sites)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	d := devicesData{Filter: f, Rows: rows, Total: total}
	d.Sites = append(d.Sites, option{Value: "", Label: "all sites", Selected: f.Site == ""})
	for _, name := range sites {
		d.Sites = append(d.Sites, option{Value: name, Label: name, Selected: name == f.Site})
	}
	for _, st := range hubstatus.All {
		d.Statuses = append(d.Statuses, option{Value: string(st), Label: string(st), Selected: slices.Contains(f.Statuses, st)})
	}
	for _, im := range []store.Impairment{store.ImpairmentQuarantined, store.ImpairmentReleased, store.ImpairmentNone} {
		label := strings.ToLower(string(im))
		if im == store.ImpairmentNone {
			label = "never touched"
		}
		d.Imps = append(d.Imps, option{Value: string(im), Label: label, Selected: slices.Contains(f.Impairments, im)})
	}
	base := url.Values{}
	for k, vs := range q {
		if k != "after" {
			base[k] = vs
		}
	}
	d.Query = base.Encode()
	if more {
		next := url.Values{}
		for k, vs := range base {
			next[k] = vs
		}
		next.Set("after", rows[len(rows)-1].ID)
		d.NextHref = "/devices?" + next.Encode()
	}
	if f.After != "" {
		d.FirstHref = "/devices"
		if d.Query != "" {
			d.FirstHref += "?" + d.Query
		}
	}
	s.render(w, r, http.StatusOK, "devices", "Devices", d)
}

// ---- one device ----

type deviceData struct {
	Device     *ironlinkv1.Device
	Status     []*ironlinkv1.StatusChange
	Impairment []*ironlinkv1.ImpairmentChange
	Commands   []*ironlinkv1.OperatorCommand
	CondHist   []conditionChange
	Timeline   timelineSVG
	CanWrite   bool
	Command    *commandData // the command named in ?command=, if any
}

func (s *Server) device(w http.ResponseWriter, r *http.Request, id Identity) {
	ctx := apiContext(r.Context(), id)
	resp, err := s.fleet.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: r.PathValue("id"), HistoryLimit: historyLimit})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	dev := resp.GetDevice()
	cmds, err := s.fleet.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{DeviceId: dev.GetDeviceId(), PageSize: commandsShown})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	ch, err := conditionHistory(ctx, s.store.Pool(), dev.GetDeviceId(), historyLimit*7)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	d := deviceData{Device: dev, Status: resp.GetStatusHistory(), Impairment: resp.GetImpairmentHistory(),
		Commands: cmds.GetCommands(), CondHist: ch, CanWrite: id.CanWrite()}
	if len(d.CondHist) > 50 {
		d.CondHist = d.CondHist[:50]
	}
	d.Timeline = deviceTimeline(s.now(), dev, resp.GetStatusHistory(), ch, resp.GetImpairmentHistory())
	if c := r.URL.Query().Get("command"); c != "" {
		if cr, err := s.fleet.GetCommand(ctx, &ironlinkv1.GetCommandRequest{CommandId: c}); err == nil && cr.GetCommand().GetDeviceId() == dev.GetDeviceId() {
			d.Command = newCommandData(cr.GetCommand())
		}
	}
	title := dev.GetName()
	if title == "" {
		title = dev.GetDeviceId()
	}
	s.render(w, r, http.StatusOK, "device", title, d)
}

// deviceTimeline turns the histories (newest first, as the API returns
// them) into the chart's lanes.
func deviceTimeline(now time.Time, dev *ironlinkv1.Device, sh []*ironlinkv1.StatusChange, ch []conditionChange, ih []*ironlinkv1.ImpairmentChange) timelineSVG {
	status := tlLane{Label: "operational status", Prefix: "st-"}
	for _, c := range sh {
		status.Points = append(status.Points, tlPoint{At: c.GetChangeTime().AsTime(), State: statusName(c.GetStatus()), Title: " · " + c.GetReason()})
	}
	if len(status.Points) == 0 && dev.GetStatusChangeTime() != nil {
		status.Points = append(status.Points, tlPoint{At: dev.GetStatusChangeTime().AsTime(), State: statusName(dev.GetStatus()), Title: " · " + dev.GetStatusReason()})
	}
	lanes := []tlLane{status}
	byType := map[string][]conditionChange{}
	for _, c := range ch {
		byType[c.Type] = append(byType[c.Type], c)
	}
	for _, c := range dev.GetConditions() {
		lane := tlLane{Label: c.GetType(), Prefix: "cond-"}
		hist := byType[c.GetType()]
		// Oldest first: a row starts a segment at its transition time when
		// the status changed, else (reason or message only) when observed.
		prev := ""
		for i := len(hist) - 1; i >= 0; i-- {
			h := hist[i]
			at := h.ObservedTime
			if h.Status != prev {
				at = h.LastTransitionTime
			}
			prev = h.Status
			title := " · " + h.Reason
			if h.Message != "" {
				title += ": " + h.Message
			}
			lane.Points = append(lane.Points, tlPoint{At: at, State: h.Status, Title: title})
		}
		if len(lane.Points) == 0 {
			lane.Points = append(lane.Points, tlPoint{At: c.GetLastTransitionTime().AsTime(), State: condName(c.GetStatus()), Title: " · " + c.GetReason()})
		}
		lanes = append(lanes, lane)
	}
	var marks []tlMark
	for _, c := range ih {
		name := impName(c.GetDesired())
		marks = append(marks, tlMark{At: c.GetChangeTime().AsTime(), Class: "imp-" + name,
			Title: fmt.Sprintf("%s (generation %d) by %s at %s: %s", name, c.GetGeneration(), c.GetActor(),
				c.GetChangeTime().AsTime().UTC().Format(time.DateTime), c.GetReason())})
	}
	return buildTimeline(now, lanes, marks)
}

// ---- quarantine, release and their progress ----

type commandData struct {
	Cmd   *ironlinkv1.OperatorCommand
	State string
	Final bool
	Error string
}

func newCommandData(c *ironlinkv1.OperatorCommand) *commandData {
	st := strings.TrimPrefix(c.GetState().String(), "COMMAND_STATE_")
	return &commandData{Cmd: c, State: st, Final: st == "SUCCEEDED" || st == "FAILED" || st == "SUPERSEDED"}
}

// impair handles a quarantine or release POST: operations:write or 403
// (nothing written), a reason, then fleet's own RPC handler. A fetch (with
// FragmentHeader) gets the command's progress fragment; a plain form POST is
// redirected to the device page showing it.
func (s *Server) impair(desired store.Impairment) func(http.ResponseWriter, *http.Request, Identity) {
	return func(w http.ResponseWriter, r *http.Request, id Identity) {
		devID := r.PathValue("id")
		if !id.CanWrite() {
			s.log.Warn("fleet view write refused: no operations:write", "client_id", id.ClientID, "device_id", devID, "desired", desired)
			s.fail(w, r, http.StatusForbidden, fmt.Sprintf("client %s lacks the operations:write scope: it may look, not quarantine or release", id.ClientID))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		if err := r.ParseForm(); err != nil {
			s.fail(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error())
			return
		}
		ctx := apiContext(r.Context(), id)
		reason := r.PostForm.Get("reason")
		var cmd *ironlinkv1.OperatorCommand
		var err error
		if desired == store.ImpairmentQuarantined {
			var resp *ironlinkv1.QuarantineDeviceResponse
			resp, err = s.fleet.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: devID, Reason: reason})
			cmd = resp.GetCommand()
		} else {
			var resp *ironlinkv1.ReleaseDeviceResponse
			resp, err = s.fleet.ReleaseDevice(ctx, &ironlinkv1.ReleaseDeviceRequest{DeviceId: devID, Reason: reason})
			cmd = resp.GetCommand()
		}
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		s.log.Info("fleet view: impairment requested", "client_id", id.ClientID, "device_id", cmd.GetDeviceId(),
			"desired", desired, "command_id", cmd.GetCommandId(), "via", id.Via)
		if isFragment(r) {
			s.render(w, r, http.StatusOK, "command", "Command", newCommandData(cmd))
			return
		}
		http.Redirect(w, r, "/devices/"+url.PathEscape(cmd.GetDeviceId())+"?command="+url.QueryEscape(cmd.GetCommandId()), http.StatusSeeOther)
	}
}

func (s *Server) command(w http.ResponseWriter, r *http.Request, id Identity) {
	resp, err := s.fleet.GetCommand(apiContext(r.Context(), id), &ironlinkv1.GetCommandRequest{CommandId: r.PathValue("id")})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "command", "Command", newCommandData(resp.GetCommand()))
}

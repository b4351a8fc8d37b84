package web

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/fleet"
	hubstatus "github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/web/webtest"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// env is a fleet view over a real, seeded PostgreSQL database.
type env struct {
	st     *store.Store
	fleet  *fleet.Server
	roster *auth.Roster
	ops    map[string]*webtest.Operator
	ids    map[string][]string // site → device ids
}

func actor(ctx context.Context) string {
	if id, ok := authn.FromContext(ctx); ok {
		return id.ClientID
	}
	return "anonymous"
}

func newEnv(t testing.TB) *env {
	t.Helper()
	ctx := context.Background()
	log := testlog.New(t)
	st, _ := storetest.New(t, log)
	path, ops := webtest.WriteRoster(t, t.TempDir(), map[string][]string{
		"ops-write": {auth.ScopeOperationsRead, auth.ScopeOperationsWrite},
		"ops-read":  {auth.ScopeOperationsRead},
		"ops-none":  {},
	})
	roster, err := auth.LoadRoster(path)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{st: st, fleet: fleet.NewServer(st, actor, log), roster: roster, ops: ops, ids: map[string][]string{}}
	seed := map[string][]webtest.Device{
		"alpha": {{Name: "a-faulted-1", Status: hubstatus.Faulted}, {Name: "a-faulted-2", Status: hubstatus.Faulted}, {Name: "a-maint", Status: hubstatus.Maintenance},
			{Name: "a-avail-1", Status: hubstatus.Available}, {Name: "a-avail-2", Status: hubstatus.Available}, {Name: "a-avail-3", Status: hubstatus.Available},
			{Name: "a-svc", Status: hubstatus.InService}, {Name: "a_held%", Status: hubstatus.Held}},
		"beta": {{Name: "b-onb", Status: hubstatus.Onboarding}, {Name: "b-val", Status: hubstatus.Validating}, {Name: "b-alloc", Status: hubstatus.Allocated},
			{Name: "b-faulted", Status: hubstatus.Faulted}},
	}
	for site, devs := range seed {
		ids, err := webtest.SeedSite(ctx, st, site, devs)
		if err != nil {
			t.Fatal(err)
		}
		e.ids[site] = ids
	}
	return e
}

func (e *env) server(t testing.TB, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg, e.fleet, e.st, func() *auth.Roster { return e.roster }, testlog.New(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var proxyCfg = Config{Addr: "127.0.0.1:0", Auth: AuthProxy, TrustedProxies: "127.0.0.1, 10.1.0.0/16", Plaintext: true}

// do sends a request as user (through a trusted proxy unless from is set).
func do(t *testing.T, h http.Handler, method, target, user, from string, form url.Values, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, target, body)
	r.RemoteAddr = "127.0.0.1:40000"
	if from != "" {
		r.RemoteAddr = from
	}
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if user != "" {
		r.Header.Set(DefaultUserHeader, user)
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestProxyAuthentication(t *testing.T) {
	e := newEnv(t)
	h := e.server(t, proxyCfg).Handler()
	for _, tc := range []struct {
		name, path, user, from string
		code                   int
		body                   string
	}{
		{name: "health needs no identity", path: "/healthz", from: "192.0.2.7:1", code: 200, body: "ok"},
		{name: "operator through a trusted proxy", path: "/", user: "ops-read", code: 200, body: "Devices by site and status"},
		{name: "trusted prefix", path: "/", user: "ops-read", from: "10.1.2.3:5", code: 200},
		{name: "IPv4-mapped IPv6 peer", path: "/", user: "ops-read", from: "[::ffff:127.0.0.1]:5", code: 200},
		{name: "header from an untrusted address", path: "/", user: "ops-write", from: "192.0.2.7:1", code: 403, body: "trusted authentication proxy"},
		{name: "trusted proxy without the header", path: "/devices", code: 401, body: "no X-Forwarded-User"},
		{name: "client not in the roster", path: "/", user: "mallory", code: 403, body: "not an operator"},
		{name: "operator without operations:read", path: "/", user: "ops-none", code: 403, body: "lacks the operations:read scope"},
		{name: "device page without the header", path: "/devices/" + e.ids["alpha"][0], user: "", code: 401},
		{name: "assets need an identity too", path: "/assets/app.js", code: 401},
		{name: "assets for an operator", path: "/assets/app.css", user: "ops-read", code: 200, body: "svg.timeline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(t, h, "GET", tc.path, tc.user, tc.from, nil, nil)
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.body) {
				t.Fatalf("GET %s as %q from %q: %d %q, want %d containing %q", tc.path, tc.user, tc.from, w.Code, w.Body.String(), tc.code, tc.body)
			}
		})
	}
}

// selfSigned is a client certificate over key, as `ironlink-hub web-cert` makes.
func selfSigned(t *testing.T, op *webtest.Operator, notAfter time.Time) tls.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: op.ClientID},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, op.Key.Public(), op.Key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: op.Key}
}

func TestMTLSAuthentication(t *testing.T) {
	e := newEnv(t)
	s := e.server(t, Config{Addr: "127.0.0.1:0", Auth: AuthMTLS, TLSCert: "unused", TLSKey: "unused"})
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	defer srv.Close()
	stranger := &webtest.Operator{ClientID: "ops-write"}
	stranger.Key, _ = auth.GenerateKey(auth.AlgES256)
	for _, tc := range []struct {
		name, path string
		cert       *tls.Certificate
		code       int
		body       string
	}{
		{name: "health without a certificate", path: "/healthz", code: 200},
		{name: "no certificate", path: "/", code: 401, body: "client certificate is required"},
		{name: "certificate over a roster key", path: "/", cert: ptr(selfSigned(t, e.ops["ops-write"], time.Now().Add(time.Hour))), code: 200, body: "ops-write"},
		{name: "certificate over an unknown key naming a roster client", path: "/", cert: ptr(selfSigned(t, stranger, time.Now().Add(time.Hour))), code: 403, body: "no operator key"},
		{name: "expired certificate", path: "/", cert: ptr(selfSigned(t, e.ops["ops-read"], time.Now().Add(-time.Minute))), code: 401, body: "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := srv.Client().Transport.(*http.Transport).Clone()
			if tc.cert != nil {
				tr.TLSClientConfig.Certificates = []tls.Certificate{*tc.cert}
			}
			resp, err := (&http.Client{Transport: tr}).Get(srv.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.body) {
				t.Fatalf("GET %s: %d %q, want %d containing %q", tc.path, resp.StatusCode, b, tc.code, tc.body)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// commandRows counts the device's commands and impairment history rows.
func commandRows(t *testing.T, e *env, id string) (cmds, hist int) {
	t.Helper()
	ctx := context.Background()
	if err := e.st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM commands WHERE device_id = $1),
		(SELECT count(*) FROM impairment_history WHERE device_id = $1)`, id).Scan(&cmds, &hist); err != nil {
		t.Fatal(err)
	}
	return cmds, hist
}

func TestWritesNeedOperationsWriteAndSameOrigin(t *testing.T) {
	e := newEnv(t)
	h := e.server(t, proxyCfg).Handler()
	dev := e.ids["alpha"][3]
	page := do(t, h, "GET", "/devices/"+dev, "ops-read", "", nil, nil)
	if page.Code != 200 || strings.Contains(page.Body.String(), "quarantine-btn") || !strings.Contains(page.Body.String(), "read-only-note") {
		t.Fatalf("read-only device page: %d, buttons shown or note missing:\n%s", page.Code, page.Body.String())
	}
	if w := do(t, h, "GET", "/devices/"+dev, "ops-write", "", nil, nil); !strings.Contains(w.Body.String(), "quarantine-btn") {
		t.Fatalf("writer's device page has no quarantine button")
	}
	form := url.Values{"reason": {"GPU 3 throws Xid 79"}}
	for _, tc := range []struct {
		name, path, user string
		hdr              map[string]string
		code             int
		body             string
	}{
		{name: "read-only quarantine", path: "/quarantine", user: "ops-read", code: 403, body: "lacks the operations:write scope"},
		{name: "read-only release", path: "/release", user: "ops-read", code: 403, body: "operations:write"},
		{name: "cross-site form post", path: "/quarantine", user: "ops-write", hdr: map[string]string{"Sec-Fetch-Site": "cross-site"}, code: 403, body: "cross-origin"},
		{name: "foreign Origin", path: "/quarantine", user: "ops-write", hdr: map[string]string{"Origin": "https://evil.example"}, code: 403, body: "cross-origin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(t, h, "POST", "/devices/"+dev+tc.path, tc.user, "", form, tc.hdr)
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.body) {
				t.Fatalf("POST: %d %q, want %d containing %q", w.Code, w.Body.String(), tc.code, tc.body)
			}
			if c, hst := commandRows(t, e, dev); c != 0 || hst != 0 {
				t.Fatalf("refused POST wrote %d commands, %d history rows", c, hst)
			}
		})
	}
	for _, tc := range []struct {
		name, reason string
		code         int
		body         string
	}{
		{name: "empty reason", reason: "  ", code: 400, body: "reason is required"},
		{name: "oversized reason", reason: strings.Repeat("x", fleet.MaxReasonBytes+1), code: 400, body: "limit 1024"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(t, h, "POST", "/devices/"+dev+"/quarantine", "ops-write", "", url.Values{"reason": {tc.reason}}, map[string]string{FragmentHeader: "1"})
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.body) {
				t.Fatalf("POST: %d %q, want %d containing %q", w.Code, w.Body.String(), tc.code, tc.body)
			}
			if c, _ := commandRows(t, e, dev); c != 0 {
				t.Fatalf("bad input wrote %d commands", c)
			}
		})
	}
	if w := do(t, h, "POST", "/devices/not-a-uuid/quarantine", "ops-write", "", form, nil); w.Code != 400 {
		t.Fatalf("malformed device id: %d, want 400", w.Code)
	}
	w := do(t, h, "POST", "/devices/"+dev+"/quarantine", "ops-write", "", form, map[string]string{FragmentHeader: "1", "Sec-Fetch-Site": "same-origin"})
	if w.Code != 200 || !strings.Contains(w.Body.String(), `data-state="PENDING"`) || !strings.Contains(w.Body.String(), "data-refresh") {
		t.Fatalf("quarantine: %d %q, want the PENDING progress fragment that keeps polling", w.Code, w.Body.String())
	}
	cmds, err := e.fleet.ListCommands(context.Background(), &ironlinkv1.ListCommandsRequest{DeviceId: dev})
	if err != nil || len(cmds.GetCommands()) != 1 || cmds.GetCommands()[0].GetActor() != "ops-write" || cmds.GetCommands()[0].GetReason() != "GPU 3 throws Xid 79" {
		t.Fatalf("commands after the quarantine: %v %v, want one by ops-write with the reason", cmds, err)
	}
	// Without the fragment header (no JavaScript) the form post redirects to the device page.
	w = do(t, h, "POST", "/devices/"+dev+"/release", "ops-write", "", url.Values{"reason": {"fixed"}}, nil)
	if w.Code != http.StatusSeeOther || !strings.HasPrefix(w.Header().Get("Location"), "/devices/"+dev+"?command=") {
		t.Fatalf("plain release: %d Location %q", w.Code, w.Header().Get("Location"))
	}
	if page := do(t, h, "GET", w.Header().Get("Location"), "ops-write", "", nil, nil); !strings.Contains(page.Body.String(), `id="command"`) {
		t.Fatalf("device page after a plain release shows no command progress")
	}
}

// TestListMatchesListDevices: the view's list (with its name search) selects
// exactly what FleetService.ListDevices selects for the same filters.
func TestListMatchesListDevices(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED
	if _, err := e.fleet.QuarantineDevice(authn.NewContext(ctx, auth.Identity{ClientID: "t"}), &ironlinkv1.QuarantineDeviceRequest{DeviceId: e.ids["alpha"][0], Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	// A non-fatal health check failing on one device: a warning, the
	// status kept (docs/reference/health.md).
	now := time.Now()
	warn := store.HealthEvent{EventID: "thermal-1", DeviceID: e.ids["alpha"][4], Condition: condition.Condition{
		Type: condition.HealthType("GPU", "GpuThermalWatch"), Status: condition.False, Reason: condition.ReasonNonFatalError,
		Message: "GPU 3 at 91 C", ObservedTime: now, LastTransitionTime: now,
		Health: &condition.Health{Agent: "gpu-health-monitor", ComponentClass: "GPU", CheckName: "GpuThermalWatch",
			ErrorCodes: []string{"thermal"}, GeneratedTime: now, ExpireTime: now.Add(time.Hour), EventID: "thermal-1"}}}
	if _, err := e.st.ReportHealth(ctx, "alpha", []store.HealthEvent{warn}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		query string
		api   *ironlinkv1.ListDevicesRequest
	}{
		{name: "health warning", query: "warning=1", api: &ironlinkv1.ListDevicesRequest{HealthWarning: true}},
		{name: "everything", query: "", api: &ironlinkv1.ListDevicesRequest{}},
		{name: "site", query: "site=alpha", api: &ironlinkv1.ListDevicesRequest{Site: "alpha"}},
		{name: "statuses", query: "status=FAULTED&status=MAINTENANCE", api: &ironlinkv1.ListDevicesRequest{Statuses: []ironlinkv1.OperationalStatus{
			ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED, ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_MAINTENANCE}}},
		{name: "comma statuses and site", query: "site=beta&status=faulted,onboarding", api: &ironlinkv1.ListDevicesRequest{Site: "beta", Statuses: []ironlinkv1.OperationalStatus{
			ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED, ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_ONBOARDING}}},
		{name: "quarantined", query: "impairment=QUARANTINED", api: &ironlinkv1.ListDevicesRequest{Impairments: []ironlinkv1.ImpairmentState{q}}},
		{name: "never touched", query: "impairment=NONE&site=alpha", api: &ironlinkv1.ListDevicesRequest{Site: "alpha", Impairments: []ironlinkv1.ImpairmentState{ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_UNSPECIFIED}}},
		{name: "orphaned", query: "orphaned=1", api: &ironlinkv1.ListDevicesRequest{InstanceMismatch: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals, _ := url.ParseQuery(tc.query)
			vals.Set("sort", "id") // ListDevices' order (the view's default is by name)
			f, err := parseListFilter(vals)
			if err != nil {
				t.Fatal(err)
			}
			f.Limit = 3 // several pages
			var got []string
			for {
				rows, more, err := listDevices(ctx, e.st.Pool(), f)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rows {
					got = append(got, r.ID)
				}
				if !more {
					break
				}
				f.After = rows[len(rows)-1].ID
			}
			var want []string
			tc.api.PageSize = 2
			for {
				resp, err := e.fleet.ListDevices(ctx, tc.api)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range resp.GetDevices() {
					want = append(want, d.GetDeviceId())
				}
				if resp.GetNextPageToken() == "" {
					break
				}
				tc.api.PageToken = resp.GetNextPageToken()
			}
			if !slices.Equal(got, want) {
				t.Fatalf("view lists %v, ListDevices %v", got, want)
			}
			if tc.name == "health warning" && !slices.Equal(got, []string{e.ids["alpha"][4]}) {
				t.Fatalf("warning=1 lists %v, want only the device with the thermal warning %s", got, e.ids["alpha"][4])
			}
			n, err := countDevices(ctx, e.st.Pool(), f)
			if err != nil || n != len(want) {
				t.Fatalf("count %d %v, want %d", n, err, len(want))
			}
		})
	}
}

func TestNameSearch(t *testing.T) {
	e := newEnv(t)
	h := e.server(t, proxyCfg).Handler()
	for _, tc := range []struct {
		name, q string
		want    []string
	}{
		{name: "substring, case-insensitive", q: "AVAIL", want: []string{"a-avail-1", "a-avail-2", "a-avail-3"}},
		{name: "LIKE wildcards are literal", q: "_held%", want: []string{"a_held%"}},
		{name: "underscore alone matches only underscores", q: "a_", want: []string{"a_held%"}},
		{name: "id prefix", q: e.ids["beta"][1][:13], want: []string{"b-val"}},
		{name: "no match", q: "zzz", want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(t, h, "GET", "/devices?q="+url.QueryEscape(tc.q), "ops-read", "", nil, nil)
			if w.Code != 200 {
				t.Fatalf("%d %s", w.Code, w.Body.String())
			}
			var got []string
			body := w.Body.String()
			for _, name := range []string{"a-faulted-1", "a-faulted-2", "a-maint", "a-avail-1", "a-avail-2", "a-avail-3", "a-svc", "a_held%", "b-onb", "b-val", "b-alloc", "b-faulted"} {
				if strings.Contains(body, ">"+name+"</a>") {
					got = append(got, name)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("search %q found %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

func TestBadListInput(t *testing.T) {
	e := newEnv(t)
	h := e.server(t, proxyCfg).Handler()
	for _, tc := range []struct{ name, query, body string }{
		{"unknown status", "status=BROKEN", "not an operational status"},
		{"bad site", "site=Not_A_Site", "not a valid site name"},
		{"bad impairment", "impairment=MAYBE", "QUARANTINED, RELEASED or NONE"},
		{"bad cursor", "after=xyz", "not a device id"},
		{"page too large", "size=5000", "outside 1-1000"},
		{"search too long", "q=" + strings.Repeat("a", 300), "limit 200"},
		// PostgreSQL refuses NUL and invalid UTF-8 in text: answered 503
		// "database unavailable" (and logged at ERROR) before.
		{"NUL in search", "q=%00", "control character"},
		{"invalid UTF-8 in search", "q=%ff", "not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(t, h, "GET", "/devices?"+tc.query, "ops-read", "", nil, nil)
			if w.Code != 400 || !strings.Contains(w.Body.String(), tc.body) {
				t.Fatalf("%d %q, want 400 containing %q", w.Code, w.Body.String(), tc.body)
			}
		})
	}
	if w := do(t, h, "GET", "/devices/3f0c1f7e-0000-4000-8000-000000000000", "ops-read", "", nil, nil); w.Code != 404 {
		t.Fatalf("unknown device: %d, want 404", w.Code)
	}
}

func TestOverviewCountsAndFragment(t *testing.T) {
	e := newEnv(t)
	h := e.server(t, proxyCfg).Handler()
	w := do(t, h, "GET", "/", "ops-read", "", nil, nil)
	body := w.Body.String()
	for _, want := range []string{
		`<a href="/devices?site=alpha&amp;status=FAULTED">2</a>`,
		`<a href="/devices?site=alpha&amp;status=AVAILABLE">3</a>`,
		`<a href="/devices?site=beta&amp;status=FAULTED">1</a>`,
		`<a href="/devices?status=FAULTED">3</a>`,
		`<a href="/devices?site=alpha">8</a>`,
		`<a href="/devices">12</a>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %s", want)
		}
	}
	if !strings.Contains(body, "<html") {
		t.Error("full page lacks <html>")
	}
	frag := do(t, h, "GET", "/", "ops-read", "", nil, map[string]string{FragmentHeader: "1"}).Body.String()
	if strings.Contains(frag, "<html") || !strings.HasPrefix(frag, `<div id="live"`) || !strings.Contains(frag, `status=FAULTED">3</a>`) {
		t.Fatalf("fragment is not the live region alone:\n%.300s", frag)
	}
	if w.Header().Get("Content-Security-Policy") == "" {
		t.Error("no content security policy")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		err  string
	}{
		{"off", Config{}, "no listen address"},
		{"mtls without TLS", Config{Addr: ":1", Plaintext: true}, "needs a TCP --web-addr with TLS"},
		{"mtls on a unix socket", Config{Addr: "unix:/tmp/x", TLSCert: "c", TLSKey: "k"}, "needs a TCP"},
		{"proxy on TCP without trusted proxies", Config{Addr: ":1", Auth: AuthProxy, Plaintext: true}, "needs --web-trusted-proxies"},
		{"bad proxy address", Config{Addr: ":1", Auth: AuthProxy, Plaintext: true, TrustedProxies: "10.0.0.300"}, "neither an IP address nor a prefix"},
		{"unknown mode", Config{Addr: ":1", Auth: "basic"}, `"basic" is neither`},
		{"proxy on a unix socket", Config{Addr: "unix:/tmp/x", Auth: AuthProxy}, ""},
		{"mtls", Config{Addr: ":1", TLSCert: "c", TLSKey: "k"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Validate: %v, want %q", err, tc.err)
			}
		})
	}
}

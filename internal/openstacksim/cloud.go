package openstacksim

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Service names used in [Fault.Service] and [Request.Service].
const (
	ServiceIdentity  = "identity"
	ServiceBaremetal = "baremetal"
	ServicePlacement = "placement"
	ServiceCompute   = "compute"
)

// Path prefixes under which the single listener serves each service.
const (
	identityPrefix  = "/identity"
	baremetalPrefix = "/baremetal"
	placementPrefix = "/placement"
	computePrefix   = "/compute"
)

// Options configures a [Cloud]. The zero value gives the test bed's setup.
type Options struct {
	// TokenTTL is how long an issued Keystone token is valid; default 1h.
	// Ironic and Placement answer 401 for a token past it.
	TokenTTL time.Duration
	// IronicMaxLimit is Ironic's [api]max_limit: the default and the cap of
	// the limit query parameter of node lists; default 1000.
	IronicMaxLimit int
	// IronicMaxVersion is the highest Ironic API microversion served, "1.N";
	// default "1.82" (the test bed's Ironic 21.4). The minimum is always 1.1.
	IronicMaxVersion string
	// PlacementMaxVersion is the highest Placement microversion served,
	// "1.N" with N ≤ 39; default "1.39" (Placement 8.0). The minimum is 1.0.
	PlacementMaxVersion string
	// NoPlacement makes a standalone-Ironic site: Placement and Nova are
	// left out of the Keystone catalog and /placement and /compute answer
	// 404.
	NoPlacement bool
	// NoNova leaves Nova (compute) out of the catalog and makes /compute
	// answer 404, for a site with Ironic and Placement but no Nova. The
	// default is a site with Nova; NoPlacement implies NoNova.
	NoNova bool
	// NovaNonAdmin simulates a credential without Nova's admin policy
	// (Nova's default policy, a token without the admin role): server
	// lists lose the OS-EXT-SRV-ATTR:* keys (and host_status, flavor
	// extra_specs), all_tenants answers 403, filters other than the
	// non-admin ones (node, host, deleted, …) are silently dropped, and
	// other projects' servers are 404. Only Nova's answers change: the
	// token still lists the admin role, and Ironic and Placement still
	// answer as for an admin.
	NovaNonAdmin bool
	// NovaMaxLimit is Nova's [api]max_limit: the default and the cap of the
	// limit query parameter of server lists; default 1000.
	NovaMaxLimit int
	// ProvisionStep is the time between two provision states of a
	// transition started through the API (provision.go: enrol, inspect,
	// clean, provide, deploy, undeploy; nova_ops.go: Nova boot and
	// delete); default 100 ms.
	ProvisionStep time.Duration
	// Logger receives one debug line per request and info lines for churn;
	// default: discard.
	Logger *slog.Logger
}

// Cloud is one simulated OpenStack site: Keystone, Ironic, Placement and
// Nova sharing one in-memory state and one HTTP listener. All methods are safe for
// concurrent use.
type Cloud struct {
	opts         Options
	log          *slog.Logger
	ironicMax    int // minor of IronicMaxVersion
	placementMax int // minor of PlacementMaxVersion

	// identity of the simulated application credential and its owner
	appCredID, appCredSecret, appCredName string
	userID, projectID                     string
	auditSeq                              int

	mu        sync.Mutex
	nodes     map[string]*nodeRec // by UUID
	nodeOrder []*nodeRec          // by id (creation order)
	nextID    int64
	providers map[string]*provider // by UUID
	traits    map[string]time.Time // defined Placement traits -> created_at
	tokens    map[string]*token
	issued    int
	provSeq   int64
	faults    []*Fault
	fieldLoss FieldLoss // see SetFieldLoss
	churn     map[string][]churnStep
	// noChurn holds the nodes Churn leaves alone (KeepFromChurn).
	noChurn map[string]bool
	ops     *opsState // provision.go

	servers     map[string]*serverRec // by ID, deleted ones too
	serverOrder []*serverRec          // creation order
	serverSeq   int64

	reqMu    sync.Mutex
	requests []Request

	srvMu sync.Mutex
	srv   *http.Server
	ln    net.Listener
	url   string
	done  chan struct{}

	now func() time.Time
}

type token struct {
	issued, expires time.Time
	revoked         bool
}

// New returns a Cloud with empty Ironic, Placement (which knows the
// os-traits standard traits) and Nova, and one application credential,
// ready for [Cloud.Start].
func New(opts Options) *Cloud {
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = time.Hour
	}
	if opts.IronicMaxLimit <= 0 {
		opts.IronicMaxLimit = 1000
	}
	if opts.IronicMaxVersion == "" {
		opts.IronicMaxVersion = "1.82"
	}
	if opts.NovaMaxLimit <= 0 {
		opts.NovaMaxLimit = 1000
	}
	if opts.PlacementMaxVersion == "" {
		opts.PlacementMaxVersion = "1.39"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Cloud{
		opts:          opts,
		log:           opts.Logger,
		appCredID:     randomHex(16),
		appCredSecret: randomHex(24),
		appCredName:   "site-agent",
		userID:        randomHex(16),
		projectID:     randomHex(16),
		nodes:         map[string]*nodeRec{},
		providers:     map[string]*provider{},
		traits:        map[string]time.Time{},
		tokens:        map[string]*token{},
		churn:         map[string][]churnStep{},
		servers:       map[string]*serverRec{},
		now:           func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) },
	}
	c.ironicMax = mustMinor(opts.IronicMaxVersion, 82)
	c.placementMax = mustMinor(opts.PlacementMaxVersion, 39)
	if c.placementMax > 39 {
		c.placementMax = 39
	}
	t0 := c.now()
	for _, t := range standardTraits {
		c.traits[t] = t0
	}
	return c
}

func mustMinor(v string, def int) int {
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil || major != 1 || minor < 1 {
		return def
	}
	return minor
}

// Start listens on addr, which must be a loopback address such as
// "127.0.0.1:0" (port 0 picks a free port), and serves in the background
// until [Cloud.Close]. It returns an error for a non-loopback address, when
// listening fails, or when the Cloud was already started.
func (c *Cloud) Start(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("openstacksim: listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		addr = net.JoinHostPort("127.0.0.1", addr[strings.LastIndex(addr, ":")+1:])
	} else if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("openstacksim: refusing to listen on non-loopback address %q", addr)
	}
	c.srvMu.Lock()
	defer c.srvMu.Unlock()
	if c.srv != nil {
		return errors.New("openstacksim: already started")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("openstacksim: %w", err)
	}
	c.ln = ln
	c.url = "http://" + ln.Addr().String()
	c.srv = &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second}
	c.done = make(chan struct{})
	go func() {
		defer close(c.done)
		if err := c.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			c.log.Error("openstacksim: serve", "err", err)
		}
	}()
	c.log.Info("openstack simulator listening", "url", c.url)
	return nil
}

// URL returns the base URL, "http://127.0.0.1:PORT" (no trailing slash), or
// "" before [Cloud.Start]. Keystone is at URL()+"/identity/v3", Ironic at
// URL()+"/baremetal", Placement at URL()+"/placement", Nova at
// URL()+"/compute/v2.1" (the catalog URL; version list at
// URL()+"/compute/").
func (c *Cloud) URL() string {
	c.srvMu.Lock()
	defer c.srvMu.Unlock()
	return c.url
}

// Close stops the listener and closes open connections. It is safe to call
// more than once and before Start.
func (c *Cloud) Close() error {
	c.srvMu.Lock()
	srv, done := c.srv, c.done
	c.srvMu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Close()
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Request is one HTTP request the Cloud answered, as recorded for
// [Cloud.Requests].
type Request struct {
	// Service is "identity", "baremetal", "placement", "compute", or "" for
	// a path outside the four prefixes (or of a service the site lacks).
	Service string
	// Method is the HTTP method.
	Method string
	// Path is relative to the service root, e.g. "/v1/nodes/abc/traits/X"
	// for Ironic, "/v3/auth/tokens" for Keystone, "/resource_providers/x"
	// for Placement, "/v2.1/servers/detail" for Nova ("" or "/" for a
	// service root).
	Path string
	// Query is the raw query string without "?".
	Query string
	// Status is the HTTP status code sent.
	Status int
	// UserAgent is the client's User-Agent header (ironlink's satellite
	// sends one starting with "ironlink-satellite").
	UserAgent string
}

// Requests returns a copy of every request answered since start or the last
// [Cloud.ResetRequests], oldest first.
func (c *Cloud) Requests() []Request {
	c.reqMu.Lock()
	defer c.reqMu.Unlock()
	return append([]Request(nil), c.requests...)
}

// ResetRequests forgets the recorded requests.
func (c *Cloud) ResetRequests() {
	c.reqMu.Lock()
	defer c.reqMu.Unlock()
	c.requests = nil
}

// statusRecorder remembers the status written through it.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

// WriteHeader records the first status code.
func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200.
func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// splitService maps a request path to its service and the path relative to
// the service root.
func splitService(p string) (service, rel string) {
	for _, s := range []struct{ prefix, name string }{
		{identityPrefix, ServiceIdentity},
		{baremetalPrefix, ServiceBaremetal},
		{placementPrefix, ServicePlacement},
		{computePrefix, ServiceCompute},
	} {
		if p == s.prefix || strings.HasPrefix(p, s.prefix+"/") {
			return s.name, p[len(s.prefix):]
		}
	}
	return "", p
}

// ServeHTTP answers one request for any of the four services. It is the
// handler [Cloud.Start] serves; tests may also mount it elsewhere.
func (c *Cloud) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	service, rel := splitService(r.URL.Path)
	if (service == ServicePlacement && c.opts.NoPlacement) || (service == ServiceCompute && !c.novaEnabled()) {
		service = ""
	}
	rec := &statusRecorder{ResponseWriter: w}
	defer func() {
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		c.reqMu.Lock()
		c.requests = append(c.requests, Request{Service: service, Method: r.Method, Path: rel, Query: r.URL.RawQuery, Status: status, UserAgent: r.UserAgent()})
		c.reqMu.Unlock()
		c.log.Debug("openstacksim request", "service", service, "method", r.Method, "path", rel, "query", r.URL.RawQuery, "status", status)
	}()

	match := rel
	if r.URL.RawQuery != "" {
		match += "?" + r.URL.RawQuery
	}
	if f := c.takeFault(service, r.Method, match); f != nil {
		if f.Before != nil {
			f.Before()
		}
		if f.Delay > 0 {
			t := time.NewTimer(f.Delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
			}
		}
		if f.Status != 0 {
			c.writeFault(rec, r, service, rel, f)
			return
		}
	}

	switch service {
	case ServiceIdentity:
		c.serveIdentity(rec, r, rel)
	case ServiceBaremetal:
		c.serveBaremetal(rec, r, rel)
	case ServicePlacement:
		c.servePlacement(rec, r, rel)
	case ServiceCompute:
		c.serveCompute(rec, r, rel)
	default:
		rec.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rec.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(rec, "404 Not Found: the simulator serves /identity, /baremetal, /placement and /compute (unless disabled)\n")
	}
}

// randomHex returns n random bytes as lower-case hex.
func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// newUUID returns a random (version 4) UUID in canonical form.
func newUUID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// requestID returns an oslo-style request id, "req-<uuid>".
func requestID() string { return "req-" + newUUID() }

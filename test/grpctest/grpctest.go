package grpctest

import (
	"context"
	"crypto"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/app"
	"github.com/ironlink/ironlink/hub/link"
	"github.com/ironlink/ironlink/hub/link/linktest"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/policyapi"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/testlog"
)

// Options configure a hub replica.
type Options struct {
	// Replica names it (default "r1").
	Replica string
	// Link tunes its link server (zero fields get link's defaults; set
	// HeartbeatInterval and CommandSweep long in tests that count messages).
	Link link.Config
	// Log receives its logs (default: discarded).
	Log *slog.Logger
	// NoAuth turns client authentication off, as --no-auth does.
	NoAuth bool
}

// Hub is a running replica. Its methods are safe for concurrent use.
type Hub struct {
	// Store is the store it serves.
	Store *store.Store
	// Link is its link server (for Drain, Links, RevokeUnauthorized).
	Link *link.Server
	// Checker checked every link stream; the test fails at cleanup on any
	// violation.
	Checker *linktest.Checker
	// Config is the hub configuration it was built from, after Validate.
	Config app.Config

	lis    *bufconn.Listener
	roster atomic.Pointer[auth.Roster]

	mu         sync.Mutex
	satellites map[string]string // client id → roster entry
	operators  map[string]string
	checkers   map[string]string        // health checkers
	checkerIDs []string                 // ids HealthChecker asked for
	keys       map[string]crypto.Signer // client id → its key
}

// Start serves a hub replica over st until the test ends; cleanup stops
// it, waits for its link handlers and reports protocol violations.
func Start(t testing.TB, st *store.Store, o Options) *Hub {
	t.Helper()
	if o.Replica == "" {
		o.Replica = "r1"
	}
	log := o.Log
	if log == nil {
		log = testlog.New(t)
	}
	// The database URL is not used: the store is already open.
	cfg, err := app.Options{DatabaseURL: "postgres://grpctest.invalid/", Replica: o.Replica, Link: o.Link,
		NoAuth: o.NoAuth, RosterPath: "grpctest", Plaintext: true}.Validate()
	if err != nil {
		t.Fatalf("grpctest: hub config: %v", err)
	}
	h := &Hub{Store: st, Checker: &linktest.Checker{}, Config: cfg, lis: bufconn.Listen(1 << 20),
		satellites: map[string]string{}, operators: map[string]string{}, checkers: map[string]string{}, keys: map[string]crypto.Signer{}}
	h.setRoster(t)
	healthSrv := app.NewHealthServer(st, cfg, log.With("component", "health"), nil)
	cfg.Link.Health = healthSrv // as hub/app: satellites forward their door's reports
	h.Link = link.NewServer(st, cfg.Link, log.With("component", "link"))
	var opts []grpc.ServerOption
	if !cfg.NoAuth {
		v := &auth.Verifier{Roster: h.roster.Load, Audience: cfg.Audience, MaxLifetime: cfg.MaxTokenLifetime, Replay: st}
		opts = app.AuthOptions(v, log)
	}
	srv := app.NewGRPCServer(cfg, log, opts...)
	hs := app.RegisterServices(srv, h.Checker.Service(h.Link), app.NewFleetServer(st, log.With("component", "fleet")))
	app.RegisterOperations(srv, hs, app.NewOperationServer(st, h.Link, log.With("component", "operations")))
	app.RegisterHealth(srv, hs, healthSrv)
	app.RegisterValidation(srv, hs, st, nil, log.With("component", "validation"))
	// PolicyService over a policy file that enables nothing (a hub without
	// --policy-file); the evaluator does not run.
	pol := policyapi.NewServer(st, policy.Static(policy.Disabled()), nil, log.With("component", "policy"))
	pol.SetReplayDB(st.Pool()) // as hub/app wires it
	ironlinkv1.RegisterPolicyServiceServer(srv, pol)
	go func() { _ = srv.Serve(h.lis) }()
	t.Cleanup(func() {
		srv.Stop()
		h.Checker.Wait()
		for _, v := range h.Checker.Violations() {
			t.Errorf("link protocol violation (replica %s): %s", o.Replica, v)
		}
	})
	return h
}

// Target is the dial target of every Hub, for grpc.NewClient with the
// options of DialOptions or SatelliteOptions.
const Target = "passthrough:///grpctest"

// DialOptions returns the options that reach the hub (in memory,
// plaintext), followed by opts.
func (h *Hub) DialOptions(opts ...grpc.DialOption) []grpc.DialOption {
	return append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return h.lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}, opts...)
}

// SatelliteOptions returns dial options (for Target) authenticated as the
// satellite of site, as Satellite does, for clients that dial themselves
// (test/faults/satsim).
func (h *Hub) SatelliteOptions(t testing.TB, site string, scopes ...string) []grpc.DialOption {
	t.Helper()
	if len(scopes) == 0 {
		scopes = []string{auth.ScopeDeviceConditionCreate, auth.ScopeDeviceUpdate}
	}
	return h.DialOptions(h.credentials(t, auth.SatelliteClientID(site), site, scopes)...)
}

// Dial returns a client connection to the hub without credentials (for
// health, reflection, or refused calls); extra options are added.
func (h *Hub) Dial(t testing.TB, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(Target, h.DialOptions(opts...)...)
	if err != nil {
		t.Fatalf("grpctest: dial: %v", err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Satellite returns a connection authenticated as the satellite of site
// (client auth.SatelliteClientID(site)), adding it to the roster with scopes
// (default: device-condition:create and device:update, as a satellite's
// roster entry has) on first use. Without authentication it is Dial.
func (h *Hub) Satellite(t testing.TB, site string, scopes ...string) *grpc.ClientConn {
	t.Helper()
	if len(scopes) == 0 {
		scopes = []string{auth.ScopeDeviceConditionCreate, auth.ScopeDeviceUpdate}
	}
	return h.client(t, auth.SatelliteClientID(site), site, scopes)
}

// SatelliteWithClock is Satellite for a satellite whose clock is off by
// offset: its client assertions are signed with that clock's times.
func (h *Hub) SatelliteWithClock(t testing.TB, site string, offset time.Duration) *grpc.ClientConn {
	t.Helper()
	opts := h.credentials(t, auth.SatelliteClientID(site), site, []string{auth.ScopeDeviceConditionCreate, auth.ScopeDeviceUpdate})
	if len(opts) == 0 {
		return h.Dial(t)
	}
	h.mu.Lock()
	key := h.keys[auth.SatelliteClientID(site)]
	h.mu.Unlock()
	return h.Dial(t, grpc.WithPerRPCCredentials(&auth.ClientCredentials{Key: key, KID: "k1", ClientID: auth.SatelliteClientID(site),
		Audience: h.Config.Audience, Insecure: true, Now: func() time.Time { return time.Now().Add(offset) }}))
}

// Operator returns a connection authenticated as operator client id with
// scopes (default operations:read and operations:write), added to the
// roster on first use.
func (h *Hub) Operator(t testing.TB, id string, scopes ...string) *grpc.ClientConn {
	t.Helper()
	if len(scopes) == 0 {
		scopes = []string{auth.ScopeOperationsRead, auth.ScopeOperationsWrite}
	}
	return h.client(t, id, "", scopes)
}

// HealthChecker returns a connection authenticated as health checker
// client id bound to site, with scopes (default device-health:create),
// added to the roster's healthCheckers on first use.
func (h *Hub) HealthChecker(t testing.TB, id, site string, scopes ...string) *grpc.ClientConn {
	t.Helper()
	if len(scopes) == 0 {
		scopes = []string{auth.ScopeDeviceHealthCreate}
	}
	h.mu.Lock()
	h.checkerIDs = append(h.checkerIDs, id)
	h.mu.Unlock()
	return h.client(t, id, site, scopes)
}

// Remove drops client id from the roster and revokes its links, as a
// roster reload does in production.
func (h *Hub) Remove(t testing.TB, id string) {
	t.Helper()
	h.mu.Lock()
	delete(h.satellites, id)
	delete(h.operators, id)
	delete(h.checkers, id)
	delete(h.keys, id)
	h.mu.Unlock()
	h.setRoster(t)
	h.Link.RevokeUnauthorized(h.roster.Load())
}

func (h *Hub) client(t testing.TB, id, site string, scopes []string) *grpc.ClientConn {
	t.Helper()
	return h.Dial(t, h.credentials(t, id, site, scopes)...)
}

// credentials returns the per-RPC credentials of client id (none without
// authentication), adding it to the roster with site and scopes on first use.
func (h *Hub) credentials(t testing.TB, id, site string, scopes []string) []grpc.DialOption {
	t.Helper()
	if h.Config.NoAuth {
		return nil
	}
	h.mu.Lock()
	key, ok := h.keys[id]
	if !ok {
		var err error
		if key, err = auth.GenerateKey("ES256"); err != nil {
			h.mu.Unlock()
			t.Fatalf("grpctest: key: %v", err)
		}
		entry, err := auth.FormatRosterEntry(id, site, scopes, "k1", key.Public())
		if err != nil {
			h.mu.Unlock()
			t.Fatalf("grpctest: roster entry: %v", err)
		}
		h.keys[id] = key
		if slices.Contains(h.checkerIDs, id) {
			h.checkers[id] = entry
		} else if site != "" {
			h.satellites[id] = entry
		} else {
			h.operators[id] = entry
		}
	}
	h.mu.Unlock()
	if !ok {
		h.setRoster(t)
	}
	return []grpc.DialOption{grpc.WithPerRPCCredentials(&auth.ClientCredentials{Key: key, KID: "k1", ClientID: id,
		Audience: h.Config.Audience, Insecure: true})}
}

// setRoster parses the current entries into the roster the verifier reads.
func (h *Hub) setRoster(t testing.TB) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, sec := range []struct {
		name    string
		entries map[string]string
	}{{"satellites", h.satellites}, {"operators", h.operators}, {"healthCheckers", h.checkers}} {
		if len(sec.entries) == 0 {
			fmt.Fprintf(&b, "%s: []\n", sec.name)
			continue
		}
		fmt.Fprintf(&b, "%s:\n", sec.name)
		ids := make([]string, 0, len(sec.entries))
		for id := range sec.entries {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			b.WriteString(sec.entries[id])
		}
	}
	r, err := auth.ParseRoster([]byte(b.String()))
	if err != nil {
		t.Fatalf("grpctest: roster: %v\n%s", err, b.String())
	}
	h.roster.Store(r)
}

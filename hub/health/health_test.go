package health

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/ironlink/ironlink/internal/testlog"
)

// fakeDB answers Ping and SchemaVersion as set.
type fakeDB struct {
	mu         sync.Mutex
	pingErr    error
	have, want int64
}

func (d *fakeDB) Ping(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pingErr
}

func (d *fakeDB) SchemaVersion(context.Context) (int64, int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.have, d.want, nil
}

func (d *fakeDB) set(f func(*fakeDB)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

// Every reason a replica is not ready shows on /readyz (503 naming it), in
// the gRPC health status of every registered name and in OnChange; /healthz
// stays 200 throughout; draining wins over a healthy database and is not
// undone by a later check.
func TestReadinessReasonsOnEveryChannel(t *testing.T) {
	db := &fakeDB{have: 8, want: 8}
	hs := health.NewServer()
	services := []string{"", "ironlink.v1.LinkService"}
	var changes []bool
	c := NewChecker(db, Options{GRPC: hs, Services: services, OnChange: func(r bool) { changes = append(changes, r) }},
		testlog.New(t))
	h := Handler(c, nil)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	grpcStatus := func() healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		var st healthpb.HealthCheckResponse_ServingStatus
		for i, s := range services {
			r, err := hs.Check(context.Background(), &healthpb.HealthCheckRequest{Service: s})
			if err != nil {
				t.Fatalf("health check %q: %v", s, err)
			}
			if i > 0 && r.GetStatus() != st {
				t.Fatalf("health of %q is %v, of %q %v: want the same verdict for every name", s, r.GetStatus(), services[0], st)
			}
			st = r.GetStatus()
		}
		return st
	}
	steps := []struct {
		name     string
		change   func(*fakeDB)
		code     int
		body     string
		want     error
		grpc     healthpb.HealthCheckResponse_ServingStatus
		drainNow bool
	}{
		{name: "ready", change: func(*fakeDB) {}, code: 200, body: "ready", grpc: healthpb.HealthCheckResponse_SERVING},
		{name: "database gone", change: func(d *fakeDB) { d.pingErr = errors.New("connection refused") },
			code: 503, body: "database unreachable", want: ErrDatabase, grpc: healthpb.HealthCheckResponse_NOT_SERVING},
		{name: "database back", change: func(d *fakeDB) { d.pingErr = nil }, code: 200, body: "ready", grpc: healthpb.HealthCheckResponse_SERVING},
		{name: "only a standby answers", change: func(d *fakeDB) { d.pingErr = fmt.Errorf("ping: %w", ErrStandby) },
			code: 503, body: "standby (read-only)", want: ErrStandby, grpc: healthpb.HealthCheckResponse_NOT_SERVING},
		{name: "primary back", change: func(d *fakeDB) { d.pingErr = nil }, code: 200, body: "ready", grpc: healthpb.HealthCheckResponse_SERVING},
		{name: "schema behind", change: func(d *fakeDB) { d.have = 7 }, code: 503, body: "schema at version 7, this binary needs 8",
			want: ErrSchemaBehind, grpc: healthpb.HealthCheckResponse_NOT_SERVING},
		{name: "schema ahead (a newer release migrated)", change: func(d *fakeDB) { d.have = 9 }, code: 200, body: "ready", grpc: healthpb.HealthCheckResponse_SERVING},
		{name: "draining", change: func(*fakeDB) {}, drainNow: true, code: 503, body: "replica draining", want: ErrDraining,
			grpc: healthpb.HealthCheckResponse_NOT_SERVING},
	}
	for _, s := range steps {
		db.set(s.change)
		if s.drainNow {
			c.SetDraining()
			if st := grpcStatus(); st != s.grpc {
				t.Fatalf("%s: gRPC health %v right after SetDraining, want %v", s.name, st, s.grpc)
			}
		}
		err := c.Check(context.Background())
		if (s.want == nil) != (err == nil) || (s.want != nil && !errors.Is(err, s.want)) {
			t.Fatalf("%s: Check = %v, want %v", s.name, err, s.want)
		}
		if code, body := get("/readyz"); code != s.code || !strings.Contains(body, s.body) {
			t.Fatalf("%s: /readyz %d %q, want %d with %q", s.name, code, body, s.code, s.body)
		}
		if st := grpcStatus(); st != s.grpc {
			t.Fatalf("%s: gRPC health %v, want %v", s.name, st, s.grpc)
		}
		if code, body := get("/healthz"); code != 200 || body != "ok\n" {
			t.Fatalf("%s: /healthz %d %q, want 200 ok (the process is alive)", s.name, code, body)
		}
	}
	// Draining sticks: a healthy database does not make the replica ready again.
	if err := c.Check(context.Background()); !errors.Is(err, ErrDraining) {
		t.Fatalf("Check after draining = %v, want ErrDraining", err)
	}
	want := []bool{true, false, true, false, true, false, true, false}
	if len(changes) != len(want) {
		t.Fatalf("OnChange calls %v, want %v (one per change of state)", changes, want)
	}
	for i := range want {
		if changes[i] != want[i] {
			t.Fatalf("OnChange calls %v, want %v", changes, want)
		}
	}
}

package openstack_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
)

// A credential Keystone stops accepting (deleted or expired application
// credential: 401 on the token request) is reported once as
// AuthenticationFailed, requests fail fast while the guard backs off instead
// of asking Keystone each time, and the state goes back to Authenticated
// once Keystone accepts the credential again.
func TestAuthGuardBacksOffAndReports(t *testing.T) {
	sim, cfg := ostest.StartSim(t, openstacksim.Options{})
	guard := openstack.NewAuthGuard(ostest.Logger(t))
	// 1 s ±50 % jitter: the 21 listings below must all fall within the
	// first backoff, at least 500 ms (at 300 ms it could be 150 ms, short
	// for a CPU-starved machine).
	guard.InitialInterval, guard.MaxInterval = time.Second, time.Second
	var mu sync.Mutex
	var changes []openstack.AuthState
	guard.OnChange = func(st openstack.AuthState) { mu.Lock(); changes = append(changes, st); mu.Unlock() }
	cfg.AuthGuard = guard
	c, err := connect(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st := guard.State(); st.Status != "True" || st.Reason != "Authenticated" {
		t.Fatalf("after connect: %+v", st)
	}
	ir := ironic.New(c.Baremetal, ostest.Logger(t))
	ir.ReadRetry = ostest.FastRetry(1)
	ctx := context.Background()
	if _, err := ir.ListNodes(ctx); err != nil {
		t.Fatal(err)
	}

	// The credential is revoked: tokens die and new ones are refused.
	sim.InjectFault(openstacksim.Fault{Service: "identity", Method: http.MethodPost, PathContains: "/auth/tokens", Status: http.StatusUnauthorized, Times: -1})
	sim.ExpireTokens()
	issued := sim.TokensIssued()
	sim.ResetRequests()
	_, err = ir.ListNodes(ctx)
	if err == nil || !openstack.IsAuthError(err) {
		t.Fatalf("listing with a revoked credential: %v", err)
	}
	if st := guard.State(); st.Status != "False" || st.Reason != "AuthenticationFailed" || st.NextAttempt.IsZero() {
		t.Fatalf("after 401: %+v", st)
	}
	// Many requests within the backoff make no token request at all.
	for range 20 {
		_, err := ir.ListNodes(ctx)
		if !openstack.IsAuthBackoff(err) {
			t.Fatalf("request during backoff: %v", err)
		}
	}
	tokenRequests := 0
	for _, r := range sim.Requests() {
		if r.Service == "identity" && r.Method == http.MethodPost {
			tokenRequests++
		}
	}
	if tokenRequests != 1 {
		t.Fatalf("%d token requests for 21 listings, want 1 (then backoff)", tokenRequests)
	}

	// Keystone accepts the credential again: after the backoff, the next
	// request re-authenticates and the state recovers.
	sim.ClearFaults()
	time.Sleep(time.Until(guard.State().NextAttempt) + 50*time.Millisecond)
	if _, err := ir.ListNodes(ctx); err != nil {
		t.Fatalf("listing after the credential is accepted again: %v", err)
	}
	if st := guard.State(); st.Status != "True" {
		t.Fatalf("after recovery: %+v", st)
	}
	if sim.TokensIssued() != issued+1 {
		t.Fatalf("tokens issued %d, want %d", sim.TokensIssued(), issued+1)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(changes) != 3 || changes[0].Status != "True" || changes[1].Reason != "AuthenticationFailed" || changes[2].Status != "True" {
		t.Fatalf("state changes %+v, want True → False → True", changes)
	}
}

// Keystone unreachable is Unknown/KeystoneUnreachable, not a refused
// credential.
func TestAuthGuardKeystoneDown(t *testing.T) {
	sim, cfg := ostest.StartSim(t, openstacksim.Options{})
	guard := openstack.NewAuthGuard(ostest.Logger(t))
	cfg.AuthGuard = guard
	c, err := connect(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ir := ironic.New(c.Baremetal, ostest.Logger(t))
	ir.ReadRetry = ostest.FastRetry(1)
	sim.InjectFault(openstacksim.Fault{Service: "identity", Status: http.StatusServiceUnavailable, Times: -1})
	sim.ExpireTokens()
	if _, err := ir.ListNodes(context.Background()); err == nil {
		t.Fatal("listing succeeded with Keystone down and tokens expired")
	}
	if st := guard.State(); st.Status != "Unknown" || st.Reason != "KeystoneUnreachable" {
		t.Fatalf("state %+v", st)
	}
}

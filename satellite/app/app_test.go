package app_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/app"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
)

// A satellite started while Keystone refuses its credential asks for a
// token once per --auth-backoff (doubling), not on its own faster connect
// schedule.
func TestRefusedCredentialAtStartIsAskedWithBackoff(t *testing.T) {
	sim, oc := ostest.StartSim(t, openstacksim.Options{})
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceIdentity, Method: http.MethodPost, PathContains: "/auth/tokens",
		Status: http.StatusUnauthorized, Times: -1})
	cfg := app.Config{Site: "refused", HubAddr: "127.0.0.1:1", OpenStack: oc, AuthBackoff: 2 * time.Second,
		Identity: app.Identity{NoAuth: true, Plaintext: true}}
	cfg.Agent.PollInterval = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Second)
	defer cancel()
	if err := app.Run(ctx, cfg, ostest.Logger(t)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range sim.Requests() {
		if r.Service == openstacksim.ServiceIdentity && r.Method == http.MethodPost {
			n++
		}
	}
	// Backoff 2 s ±50 %, then ~4 s: at most 3 requests in 7 s (without the
	// guard the connect schedule alone made ~5).
	if n < 1 || n > 3 {
		t.Fatalf("%d token requests in 7 s with --auth-backoff 2s, want 1 to 3", n)
	}
	t.Logf("%d token requests in 7 s", n)
}

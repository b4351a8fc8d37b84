package hostile

import (
	"context"
	"crypto"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

// rosterOperator is an operator entry of a test roster.
type rosterOperator struct {
	id    string
	sites []string // nil: every site
	key   crypto.Signer
}

func writeRoster(t *testing.T, path string, ops ...rosterOperator) {
	t.Helper()
	var b strings.Builder
	b.WriteString("satellites:\noperators:\n")
	for _, o := range ops {
		e, err := auth.FormatRosterEntry(o.id, "", []string{auth.ScopeOperationsRead}, "k1", o.key.Public())
		if err != nil {
			t.Fatal(err)
		}
		if o.sites != nil {
			first, rest, _ := strings.Cut(e, "\n")
			e = first + "\n    sites: [" + strings.Join(o.sites, ", ") + "]\n" + rest
		}
		b.WriteString(e)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // atomically, as a config-map update
		t.Fatal(err)
	}
}

// streamEnd waits for recv to fail and returns its error (nil after 15 s).
func streamEnd(recv func() error) error {
	done := make(chan error, 1)
	go func() {
		for {
			if err := recv(); err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(15 * time.Second):
		return nil
	}
}

// Access follows the roster at once: on a roster file change, the open
// WatchFleet and WatchOperation streams of a removed operator end
// Unauthenticated, those of a narrowed operator on a site it lost end
// PermissionDenied, and its fleet-wide watch stays open but carries only
// the sites still allowed (real hub process, roster reloaded from disk).
func TestRosterReloadReachesOpenStreams(t *testing.T) {
	const audience = "https://hub.roster.test"
	keyA, _ := auth.GenerateKey(auth.AlgES256)
	keyB, _ := auth.GenerateKey(auth.AlgES256)
	opsA := rosterOperator{"ops-a", []string{"alpha", "beta"}, keyA}
	opsB := rosterOperator{"ops-b", nil, keyB}
	roster := filepath.Join(t.TempDir(), "roster.yaml")
	writeRoster(t, roster, opsA, opsB)
	db := pgtest.NewDatabase(t)
	h := harness.StartHub(t, binaries(t), db, "roster", "--no-auth=false", "--roster", roster, "--audience", audience)
	pool := harness.Pool(t, db)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO sites (name) VALUES ('alpha'), ('beta')`); err != nil {
		t.Fatal(err)
	}
	newOp := func(site string) string {
		var id string
		if err := pool.QueryRow(ctx, `INSERT INTO operations (group_id, site, device_id, kind, actor, reason)
			VALUES (gen_random_uuid(), $1, gen_random_uuid(), 'INSPECT', 'test', 'roster test') RETURNING id`, site).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	betaOp := newOp("beta")
	as := func(o rosterOperator) context.Context {
		tok, err := auth.Sign(o.key, "k1", o.id, audience, time.Minute, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	cc := harness.Dial(t, h.Addr)
	fleet, ops := ironlinkv1.NewFleetServiceClient(cc), ironlinkv1.NewOperationServiceClient(cc)
	opKinds := []ironlinkv1.FleetEventKind{ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_OPERATION_STATE}

	watchBeta, err := fleet.WatchFleet(as(opsA), &ironlinkv1.WatchFleetRequest{Site: "beta"})
	if err != nil {
		t.Fatal(err)
	}
	watchAll, err := fleet.WatchFleet(as(opsA), &ironlinkv1.WatchFleetRequest{Kinds: opKinds})
	if err != nil {
		t.Fatal(err)
	}
	watchOp, err := ops.WatchOperation(as(opsA), &ironlinkv1.WatchOperationRequest{OperationId: betaOp})
	if err != nil {
		t.Fatal(err)
	}
	watchB, err := fleet.WatchFleet(as(opsB), &ironlinkv1.WatchFleetRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Each stream is open and authorized: its first message arrives.
	for name, recv := range map[string]func() error{
		"watch beta": func() error { _, err := watchBeta.Recv(); return err },
		"watch all":  func() error { _, err := watchAll.Recv(); return err },
		"watch op":   func() error { _, err := watchOp.Recv(); return err },
		"ops-b":      func() error { _, err := watchB.Recv(); return err },
	} {
		if err := recv(); err != nil {
			t.Fatalf("%s before the reload: %v", name, err)
		}
	}

	opsA.sites = []string{"alpha"} // narrowed
	writeRoster(t, roster, opsA)   // ops-b removed
	for _, tc := range []struct {
		name string
		recv func() error
		code codes.Code
	}{
		{"ops-a's watch of beta", func() error { _, err := watchBeta.Recv(); return err }, codes.PermissionDenied},
		{"ops-a's watch of beta's operation", func() error { _, err := watchOp.Recv(); return err }, codes.PermissionDenied},
		{"removed ops-b's watch", func() error { _, err := watchB.Recv(); return err }, codes.Unauthenticated},
	} {
		err := streamEnd(tc.recv)
		if status.Code(err) != tc.code {
			t.Errorf("%s after the roster change: %v, want %v within 15 s", tc.name, err, tc.code)
		}
	}

	// The fleet-wide watch stays open, re-filtered: beta's new operation
	// (created first) never arrives, alpha's does.
	newOp("beta")
	alphaOp := newOp("alpha")
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		m, err := watchAll.Recv()
		if err != nil {
			t.Fatalf("ops-a's fleet-wide watch ended: %v", err)
		}
		ev := m.GetEvent()
		if ev == nil {
			continue
		}
		if site := ev.GetOperationState().GetOperation().GetSite(); site != "alpha" {
			t.Fatalf("ops-a, narrowed to alpha, received an event of site %q: %v", site, ev)
		}
		if strings.Contains(ev.String(), alphaOp) {
			return
		}
	}
	t.Fatal("alpha's operation event never reached ops-a's fleet-wide watch")
}

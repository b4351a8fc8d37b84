package operations_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/pgtest"
)

// TestNotifierWakesOnStoreChanges: a change the store makes to an operation
// reaches a subscriber through LISTEN/NOTIFY (no poll involved).
func TestNotifierWakesOnStoreChanges(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := operations.NewNotifier()
	done := make(chan error, 1)
	go func() { done <- n.Listen(ctx, f.st.Notifications()) }()
	_, ops, err := f.st.CreateOperations(ctx, []store.NewOperation{{ID: uuid.NewString(), Site: "site-a", DeviceID: f.devs["a-manageable"],
		Kind: "INSPECT", Actor: "op", Reason: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the listener is connected: a probe notification arrives.
	probe, stopProbe := n.Subscribe("probe")
	defer stopProbe()
	for connected := false; !connected; {
		pgtest.MustExec(t, f.url, `SELECT pg_notify($1, 'probe')`, store.OperationsChannel)
		select {
		case <-probe:
			connected = true
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	wake, stop := n.Subscribe(ops[0].ID)
	defer stop()
	if _, err := f.st.CancelOperation(ctx, ops[0].ID, "op", "x", operations.Abortable); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up from LISTEN/NOTIFY within 5 s of the change")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Listen returned %v after cancel, want nil", err)
	}
}

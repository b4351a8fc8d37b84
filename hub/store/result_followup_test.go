package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/store"
)

// A result whose device row a condition group holds is recorded at once;
// the device's applied generation follows once the row is free, even when
// the link's context ended meanwhile (a replica draining: seen in CI as
// "desired generation 1, applied 0" after TestDrainReplicaWith100Links).
// And when a replica dies before that follow-up, the site's next link
// heals the device from the SUCCEEDED command.
func TestResultFollowUpOutlivesTheLinkAndHeals(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	sess := open(t, s, "site-a")
	now := time.Now().UTC()
	id, other := uuid.NewString(), uuid.NewString()
	if _, err := s.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{
		{DeviceID: id, Conditions: conds(now, nil), ObservedTime: now},
		{DeviceID: other, Conditions: conds(now, nil), ObservedTime: now},
	}}); err != nil {
		t.Fatal(err)
	}
	q, err := s.SetDesiredImpairment(ctx, id, store.ImpairmentQuarantined, "op", "bad GPU", "operator-api")
	if err != nil {
		t.Fatal(err)
	}

	// A "group" holds the device row.
	conn := connect(t, url)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM devices WHERE id = $1 FOR NO KEY UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	linkCtx, closeLink := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.RecordResult(linkCtx, "site-a", store.CommandResult{CommandID: q.ID, DeviceID: id, Generation: q.Generation, Success: true})
		done <- err
	}()
	// The command is SUCCEEDED while the row is still held.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := s.GetCommand(ctx, q.ID)
		if err != nil {
			t.Fatal(err)
		}
		if c.State == store.CommandSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("command %s while its device row is held, want SUCCEEDED at once", c.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	closeLink() // the link closes (a drain) while the follow-up waits
	time.Sleep(200 * time.Millisecond)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("RecordResult: %v", err)
	}
	if d, _ := s.GetDevice(ctx, id); d.AppliedGeneration != q.Generation {
		t.Fatalf("applied generation %d after the row was freed, want %d (the follow-up gave up with the link)", d.AppliedGeneration, q.Generation)
	}

	// A replica killed between the command's commit and the follow-up.
	q2, err := s.SetDesiredImpairment(ctx, other, store.ImpairmentQuarantined, "op", "bad PSU", "operator-api")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE commands SET state = 'SUCCEEDED', completed_at = now() WHERE id = $1`, q2.ID); err != nil {
		t.Fatal(err)
	}
	if d, _ := s.GetDevice(ctx, other); d.AppliedGeneration != 0 {
		t.Fatalf("applied generation %d before the heal, want 0", d.AppliedGeneration)
	}
	open(t, s, "site-a")
	if d, _ := s.GetDevice(ctx, other); d.AppliedGeneration != q2.Generation || d.LastCommandError != "" {
		t.Fatalf("after the next link opened: applied generation %d, last error %q; want %d, none", d.AppliedGeneration, d.LastCommandError, q2.Generation)
	}
	if d, _ := s.GetDevice(ctx, id); d.AppliedGeneration != q.Generation {
		t.Fatalf("healthy device's applied generation changed to %d", d.AppliedGeneration)
	}
}

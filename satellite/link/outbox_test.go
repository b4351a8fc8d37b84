package link

import (
	"testing"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

func devs(ids ...string) []*ironlinkv1.DeviceUpdate {
	var out []*ironlinkv1.DeviceUpdate
	for _, id := range ids {
		out = append(out, &ironlinkv1.DeviceUpdate{DeviceId: id})
	}
	return out
}

func woken(o *Outbox) bool {
	select {
	case <-o.Wake():
		return true
	default:
		return false
	}
}

// A link that starts before the first complete listing must still get its
// snapshot as soon as the listing is done.
func TestSnapshotSentOnceListingCompletes(t *testing.T) {
	o := NewOutbox()
	o.Restart(41, true)
	listed := false
	snap := func() ([]*ironlinkv1.DeviceUpdate, bool) {
		if !listed {
			return nil, false
		}
		return devs("a", "b"), true
	}
	woken(o)
	if got := o.Take(snap); len(got) != 0 {
		t.Fatalf("took %d batches before any listing", len(got))
	}
	listed = true
	o.Push(devs("a")) // the first poll's deltas, dropped for the snapshot
	if !woken(o) {
		t.Fatal("push while a snapshot is pending did not wake the sender")
	}
	got := o.Take(snap)
	if len(got) != 1 || got[0].GetSequence() != 42 || !got[0].GetSnapshot().GetFinal() || len(got[0].GetDevices()) != 2 {
		t.Fatalf("snapshot batches: %v", got)
	}
}

func TestSnapshotSplitsAndNumbersAfterHub(t *testing.T) {
	o := NewOutbox()
	o.MaxDevicesPerBatch = 2
	o.Restart(9, true)
	got := o.Take(func() ([]*ironlinkv1.DeviceUpdate, bool) { return devs("a", "b", "c", "d", "e"), true })
	if len(got) != 3 {
		t.Fatalf("%d batches, want 3", len(got))
	}
	for i, b := range got {
		if b.GetSequence() != uint64(10+i) || b.GetSnapshot().GetSnapshotId() != got[0].GetSnapshot().GetSnapshotId() {
			t.Fatalf("batch %d: %v", i, b)
		}
		if b.GetSnapshot().GetFinal() != (i == 2) {
			t.Fatalf("batch %d final=%v", i, b.GetSnapshot().GetFinal())
		}
	}
	// An empty site still sends one (final) snapshot batch, so removals apply.
	o.Restart(0, true)
	empty := o.Take(func() ([]*ironlinkv1.DeviceUpdate, bool) { return nil, true })
	if len(empty) != 1 || !empty[0].GetSnapshot().GetFinal() || empty[0].GetSequence() != 13 {
		t.Fatalf("empty snapshot: %v", empty)
	}
}

func TestAckDropsAndBoundCoalescesToSnapshot(t *testing.T) {
	o := NewOutbox()
	o.MaxBatches = 3
	snap := func() ([]*ironlinkv1.DeviceUpdate, bool) { return devs("x"), true }
	o.Restart(0, true)
	o.Take(snap) // snapshot seq 1
	o.Push(devs("a"))
	o.Push(devs("b"))
	if got := o.Take(snap); len(got) != 2 || got[0].GetSequence() != 2 {
		t.Fatalf("deltas: %v", got)
	}
	o.Ack(2)
	if n, last := o.Pending(); n != 1 || last != 3 {
		t.Fatalf("pending %d last %d, want 1 and 3", n, last)
	}
	// Overflow: more than MaxBatches unacked → queue dropped, snapshot instead.
	for _, id := range []string{"c", "d", "e"} {
		o.Push(devs(id))
	}
	got := o.Take(snap)
	if len(got) != 1 || got[0].GetSnapshot() == nil || got[0].GetSequence() != 7 {
		t.Fatalf("after overflow: %v", got)
	}
}

// A reconnect of the same process resends exactly the batches the hub has
// not committed; a hub that is behind or ahead gets a snapshot instead.
func TestRestartResendsExactlyWhatIsMissing(t *testing.T) {
	snap := func() ([]*ironlinkv1.DeviceUpdate, bool) { return devs("s"), true }
	o := NewOutbox()
	o.Restart(0, true)
	o.Take(snap) // snapshot, seq 1
	o.Ack(1)
	o.Push(devs("a"))
	o.Push(devs("b"))
	o.Push(devs("c"))
	o.Take(snap) // 2, 3, 4 sent; link drops before any ack

	o.Restart(3, true) // the hub committed 2 and 3 but its acks were lost
	got := o.Take(snap)
	if len(got) != 1 || got[0].GetSequence() != 4 || got[0].GetSnapshot() != nil {
		t.Fatalf("resend after restart(3): %v", got)
	}
	o.Restart(4, true)
	if got := o.Take(snap); len(got) != 0 {
		t.Fatalf("nothing is missing, yet sent %v", got)
	}
	o.Push(devs("d"))
	if got := o.Take(snap); len(got) != 1 || got[0].GetSequence() != 5 {
		t.Fatalf("numbering after resume: %v", got)
	}

	// The hub lost batches this process no longer holds (say, a restored
	// database that only has sequence 1): snapshot, numbered after our own.
	o.Ack(5)
	o.Restart(1, true)
	got = o.Take(snap)
	if len(got) != 1 || got[0].GetSnapshot() == nil || got[0].GetSequence() != 6 {
		t.Fatalf("hub behind: %v", got)
	}
	// The hub is ahead (another process of the site numbered further).
	o.Ack(6)
	o.Restart(100, true)
	got = o.Take(snap)
	if len(got) != 1 || got[0].GetSnapshot() == nil || got[0].GetSequence() != 101 {
		t.Fatalf("hub ahead: %v", got)
	}
}

// When another process committed the hub's last sequence, this process's
// queue cannot fill the gap: it snapshots even if the numbers line up.
func TestRestartAfterAnotherWriterSnapshots(t *testing.T) {
	snap := func() ([]*ironlinkv1.DeviceUpdate, bool) { return devs("s"), true }
	o := NewOutbox()
	o.Restart(0, true)
	o.Take(snap) // 1
	o.Ack(1)
	o.Push(devs("a"))
	o.Take(snap)        // 2, unacked
	o.Restart(2, false) // sequence 2 was committed, but by someone else
	got := o.Take(snap)
	if len(got) != 1 || got[0].GetSnapshot() == nil || got[0].GetSequence() != 3 {
		t.Fatalf("want a snapshot numbered 3, got %v", got)
	}
}

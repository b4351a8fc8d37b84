package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/store"
)

// TestSnapshotDueAfterAnotherProcess: a link from a satellite process
// other than the one whose batches the hub holds makes the site's evidence
// not fresh (SnapshotDue) until a final snapshot part is applied; a
// reconnect of the same process, or the first process of a site, does
// not. While it is due, no process is named as the last batch's, so even
// the process whose batches the hub holds sends a snapshot when it links
// again (it would resume, and the flag never clear).
func TestSnapshotDueAfterAnotherProcess(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	now := time.Now().UTC()
	dev := uuid.NewString()
	upd := store.DeviceUpdate{DeviceID: dev, Conditions: conds(now, nil), ObservedTime: now}
	var owner string // the boot id the last link's Welcome named
	link := func(boot string) int64 {
		t.Helper()
		sess, err := s.OpenLink(ctx, store.LinkHello{Site: "site-a", BootID: boot, Replica: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		owner = sess.LastSequenceBootID
		return sess.Epoch
	}
	apply := func(epoch int64, b store.Batch) {
		t.Helper()
		if _, err := s.ApplyBatch(ctx, "site-a", epoch, b); err != nil {
			t.Fatal(err)
		}
	}
	want := func(step string, due bool) {
		t.Helper()
		sites, err := s.PolicySites(ctx, now.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if len(sites) != 1 || sites[0].Evidence.SnapshotDue != due {
			t.Fatalf("%s: evidence %+v, want SnapshotDue %v", step, sites, due)
		}
	}
	e := link("p1")
	want("the site's first process", false)
	apply(e, store.Batch{Sequence: 1, SnapshotID: "s1", SnapshotFinal: true, Devices: []store.DeviceUpdate{upd}})
	want("after its snapshot", false)
	link("p1")
	want("the same process reconnected", false)
	e = link("p2")
	want("another process", true)
	apply(e, store.Batch{Sequence: 2, SnapshotID: "s2", Devices: []store.DeviceUpdate{upd}})
	want("its snapshot's first part applied", true)
	e = link("p2")
	want("that process reconnected before its final part", true)
	apply(e, store.Batch{Sequence: 3, SnapshotID: "s3", SnapshotFinal: true, Devices: []store.DeviceUpdate{upd}})
	want("its final part applied", false)
	if link("p2"); owner != "p2" {
		t.Fatalf("p2 reconnected with nothing due: welcome names %q as the last batch's, want p2 (it resumes)", owner)
	}

	// p3 links (due) and goes before sending anything; p2, whose batches
	// the hub holds, comes back: it must snapshot, not resume.
	link("p3")
	want("p3 linked", true)
	if e = link("p2"); owner != "" {
		t.Fatalf("p2 back while p3's snapshot is due: welcome names %q as the last batch's, want none (p2 must snapshot)", owner)
	}
	want("p2 back, nothing applied", true)
	apply(e, store.Batch{Sequence: 4, SnapshotID: "s4", SnapshotFinal: true, Devices: []store.DeviceUpdate{upd}})
	want("p2's snapshot applied", false)
}

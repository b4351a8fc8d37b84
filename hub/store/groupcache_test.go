package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// The replica holding a site's link keeps the site's conditions in
// memory between its batches; a health report committed through another
// replica in between changes them behind its back. The link's next batch
// must derive the device's status from the conditions as stored (the
// health fault included), not as the link's replica last wrote them, and a
// second health report after that, healthy again, must be seen too.
func TestLinkBatchSeesConditionsWrittenByAnotherReplica(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	other, err := store.Open(ctx, url, testlog.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	site := storetest.NewSite(t, s, "site-a", 2, nil)
	id := site.IDs[0]
	t0 := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)

	// A batch through the link's replica: its conditions are now kept.
	at := time.Now().UTC()
	site.Send([]store.DeviceUpdate{{DeviceID: id, ObservedTime: at, Conditions: storetest.Healthy(at)}})
	report(t, other, "site-a", xid(id, "e1", t0, false, true, "79"))
	if st, _, _ := deviceStatus(t, s, id); st != status.Faulted {
		t.Fatalf("after the fatal health event: %s, want FAULTED", st)
	}

	// The link's next batch changes a message only: the device stays
	// FAULTED (its health condition still says so).
	at = at.Add(time.Second)
	next := storetest.Healthy(at)
	for i := range next {
		next[i].Message = "again"
	}
	site.Send([]store.DeviceUpdate{{DeviceID: id, ObservedTime: at, Conditions: next}})
	st, reason, _ := deviceStatus(t, s, id)
	if st != status.Faulted || reason != "health.GPU/GpuXidError=False: FatalError (79)" {
		t.Fatalf("after the link's batch: %s %q, want FAULTED naming the health check", st, reason)
	}

	// Healthy through the other replica, then a link batch: AVAILABLE,
	// with one status row for each change.
	report(t, other, "site-a", xid(id, "e2", t0.Add(10*time.Second), true, true))
	at = at.Add(time.Second)
	site.Send([]store.DeviceUpdate{{DeviceID: id, ObservedTime: at, Conditions: storetest.Healthy(at)}})
	if st, _, _ := deviceStatus(t, s, id); st != status.Available {
		t.Fatalf("after the healthy event and a batch: %s, want AVAILABLE", st)
	}
	rows := pgtest.Count(t, url, `SELECT count(*) FROM status_history WHERE device_id = $1 AND status = 'FAULTED'`, id)
	if rows != 1 {
		t.Fatalf("%d FAULTED status rows, want 1", rows)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM device_conditions WHERE device_id = $1 AND health IS NOT NULL AND status = $2`,
		id, string(condition.True)); n != 1 {
		t.Fatalf("%d healthy health conditions stored, want 1", n)
	}
}

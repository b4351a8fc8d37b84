package store_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
)

// asOfStatuses lists the fleet as of at with f, as "name=STATUS" sorted.
func asOfStatuses(t *testing.T, s *store.Store, f store.DeviceFilter) string {
	t.Helper()
	f.Limit = 100
	devs, _, err := s.ListDevices(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range devs {
		e := d.Name + "=" + string(d.Status)
		if d.Removed {
			e += "(removed)"
		}
		out = append(out, e)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// TestAsOfAnswersMatchTheDrivenStates drives a site through known states
// and reads the fleet back as of the instant after each step.
func TestAsOfAnswersMatchTheDrivenStates(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	sess := open(t, s, "site-b")
	seq := uint64(0)
	ids := map[string]string{"a": uuid.NewString(), "b": uuid.NewString(), "c": uuid.NewString(), "d": uuid.NewString()}
	apply := func(snap string, final bool, upd ...store.DeviceUpdate) {
		t.Helper()
		seq++
		if _, err := s.ApplyBatch(ctx, "site-b", sess.Epoch, store.Batch{Sequence: seq, SnapshotID: snap, SnapshotFinal: final, Devices: upd}); err != nil {
			t.Fatal(err)
		}
	}
	dev := func(name string, over map[condition.Type]condition.Status) store.DeviceUpdate {
		now := time.Now().UTC()
		return store.DeviceUpdate{DeviceID: ids[name], ObservedTime: now, Facts: &store.Facts{Name: name}, Conditions: conds(now, over)}
	}
	faulty := map[condition.Type]condition.Status{condition.ProvisioningHealthy: condition.False}

	t0 := time.Now()
	apply("s1", true, dev("a", nil), dev("b", nil), dev("c", nil))
	t1 := time.Now()
	apply("", false, dev("a", faulty))
	t2 := time.Now()
	q, err := s.SetDesiredImpairment(ctx, ids["b"], store.ImpairmentQuarantined, "op", "bad GPU", "operator-api")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordResult(ctx, "site-b", store.CommandResult{CommandID: q.ID, DeviceID: ids["b"], Generation: q.Generation, Success: true}); err != nil {
		t.Fatal(err)
	}
	t3 := time.Now()
	// a recovers, c leaves the site (not in the next snapshot), d arrives.
	apply("s2", true, dev("a", nil), dev("b", nil), dev("d", nil))
	t4 := time.Now()

	for _, tc := range []struct {
		name string
		f    store.DeviceFilter
		want string
	}{
		{"before anything", store.DeviceFilter{AsOf: t0}, ""},
		{"first snapshot", store.DeviceFilter{AsOf: t1}, "a=AVAILABLE b=AVAILABLE c=AVAILABLE"},
		{"a faulted", store.DeviceFilter{AsOf: t2}, "a=FAULTED b=AVAILABLE c=AVAILABLE"},
		{"FAULTED at site-b at t2", store.DeviceFilter{AsOf: t2, Site: "site-b", Statuses: []status.Status{status.Faulted}}, "a=FAULTED"},
		{"FAULTED at t4 (recovered)", store.DeviceFilter{AsOf: t4, Statuses: []status.Status{status.Faulted}}, ""},
		{"b quarantined", store.DeviceFilter{AsOf: t3}, "a=FAULTED b=QUARANTINED c=AVAILABLE"},
		{"quarantined filter at t3", store.DeviceFilter{AsOf: t3, Impairments: []store.Impairment{store.ImpairmentQuarantined}}, "b=QUARANTINED"},
		{"quarantined filter at t2", store.DeviceFilter{AsOf: t2, Impairments: []store.Impairment{store.ImpairmentQuarantined}}, ""},
		{"c removed, d new", store.DeviceFilter{AsOf: t4}, "a=AVAILABLE b=QUARANTINED d=AVAILABLE"},
		{"with removed", store.DeviceFilter{AsOf: t4, IncludeRemoved: true}, "a=AVAILABLE b=QUARANTINED c=AVAILABLE(removed) d=AVAILABLE"},
		{"name filter", store.DeviceFilter{AsOf: t2, NameLike: "a%"}, "a=FAULTED"},
		{"other site", store.DeviceFilter{AsOf: t4, Site: "site-x"}, ""},
		{"site scope", store.DeviceFilter{AsOf: t4, Sites: []string{}}, ""},
	} {
		if got := asOfStatuses(t, s, tc.f); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	// The present is unchanged by all this: a as_of-less listing is current.
	if got := asOfStatuses(t, s, store.DeviceFilter{IncludeRemoved: true}); got != "a=AVAILABLE b=QUARANTINED c=AVAILABLE(removed) d=AVAILABLE" {
		t.Errorf("current listing %q", got)
	}

	// Paging as of a time walks the same devices in id order.
	var paged []string
	f := store.DeviceFilter{AsOf: t4, IncludeRemoved: true, Limit: 1}
	for {
		devs, more, err := s.ListDevices(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range devs {
			paged = append(paged, d.ID)
			f.After = d.ID
		}
		if !more {
			break
		}
	}
	if len(paged) != 4 || !sort.StringsAreSorted(paged) {
		t.Errorf("paged as of t4: %v", paged)
	}

	// GetDevice as of t2: a's conditions as they were, FAULTED.
	a, err := s.GetDeviceAsOf(ctx, ids["a"], t2)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != status.Faulted || len(a.Conditions) != 7 || a.ObservedAt == nil {
		t.Fatalf("a as of t2: %+v", a)
	}
	for _, c := range a.Conditions {
		want := condition.True
		if c.Type == condition.ProvisioningHealthy {
			want = condition.False
		} else if c.Type == condition.InValidationPool || c.Type == condition.InstanceAllocated || c.Type == condition.CustomerAllocated {
			want = condition.False
		}
		if c.Status != want {
			t.Errorf("a as of t2: %s=%s, want %s", c.Type, c.Status, want)
		}
	}
	if a, _ := s.GetDeviceAsOf(ctx, ids["a"], t4); a.Status != status.Available {
		t.Errorf("a as of t4: %s", a.Status)
	}
	sh, err := s.StatusHistoryAsOf(ctx, ids["a"], t2, 10)
	if err != nil || len(sh) != 2 || sh[0].Status != status.Faulted || sh[1].Status != status.Available {
		t.Fatalf("a's status history as of t2: %+v %v", sh, err)
	}
	// b as of t3: quarantined, generation 1 applied; as of t2: untouched.
	b, err := s.GetDeviceAsOf(ctx, ids["b"], t3)
	if err != nil || b.DesiredImpairment != store.ImpairmentQuarantined || b.DesiredGeneration != 1 || b.AppliedGeneration != 1 || b.Status != status.Quarantined {
		t.Fatalf("b as of t3: %+v %v", b, err)
	}
	if b, _ := s.GetDeviceAsOf(ctx, ids["b"], t2); b.DesiredImpairment != store.ImpairmentNone || b.DesiredGeneration != 0 || b.Status != status.Available {
		t.Fatalf("b as of t2: %+v", b)
	}
	if ih, err := s.ImpairmentHistoryAsOf(ctx, ids["b"], t2, 10); err != nil || len(ih) != 0 {
		t.Fatalf("b's impairment history as of t2: %+v %v", ih, err)
	}
	if ih, err := s.ImpairmentHistoryAsOf(ctx, ids["b"], t3, 10); err != nil || len(ih) != 1 || ih[0].Actor != "op" {
		t.Fatalf("b's impairment history as of t3: %+v %v", ih, err)
	}
	// c: present at t3, removed at t4, still readable.
	if c, err := s.GetDeviceAsOf(ctx, ids["c"], t3); err != nil || c.Removed {
		t.Fatalf("c as of t3: %+v %v", c, err)
	}
	if c, err := s.GetDeviceAsOf(ctx, ids["c"], t4); err != nil || !c.Removed || c.RemovedAt == nil {
		t.Fatalf("c as of t4: %+v %v", c, err)
	}
	// d did not exist at t3.
	if _, err := s.GetDeviceAsOf(ctx, ids["d"], t3); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("d as of t3: %v, want ErrNotFound", err)
	}
	// Facts have no history: the instance-mismatch filter is refused.
	if _, _, err := s.ListDevices(ctx, store.DeviceFilter{AsOf: t4, InstanceMismatch: true, Limit: 10}); !errors.Is(err, store.ErrAsOfUnsupported) {
		t.Fatalf("instance_mismatch as of: %v", err)
	}
}

// TestAsOfUnreachableKeepsLastKnownStatus: a site gone silent makes its
// devices UNREACHABLE; as of then, the status before is the last known.
func TestAsOfUnreachableKeepsLastKnownStatus(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	id := newHistoryDevice(t, s, "site-c")
	if _, err := s.MarkStaleSites(ctx, 0); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	d, err := s.GetDeviceAsOf(ctx, id, at)
	if err != nil || d.Status != status.Unreachable || d.LastKnownStatus != status.Available {
		t.Fatalf("as of stale: %+v %v", d, err)
	}
	cur, _ := s.GetDevice(ctx, id)
	if cur.Status != status.Unreachable {
		t.Fatalf("current %s, want UNREACHABLE (MarkStaleSites(0) should make the site stale)", cur.Status)
	}
}

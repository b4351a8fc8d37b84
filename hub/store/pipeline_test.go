package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
)

// siteBatches is a site's run of batches over two devices: first report,
// a maintenance flap (status changes and back), a reason-only change, a
// duplicate, and a device reported twice in one batch.
func siteBatches(x, y string, t0 time.Time) []Batch {
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	with := func(i int, msg string, typ condition.Type, st condition.Status) []condition.Condition {
		c := groupConds(at(i), msg)
		for j := range c {
			if c[j].Type == typ {
				c[j].Status = st
			}
		}
		return c
	}
	return []Batch{
		{Sequence: 1, Devices: []DeviceUpdate{
			{DeviceID: x, ObservedTime: at(1), Conditions: groupConds(at(1), "a")},
			{DeviceID: y, ObservedTime: at(1), Conditions: groupConds(at(1), "a")}}},
		{Sequence: 2, Devices: []DeviceUpdate{{DeviceID: x, ObservedTime: at(2), Conditions: with(2, "b", condition.MaintenanceClear, condition.False)}}},
		{Sequence: 3, Devices: []DeviceUpdate{
			{DeviceID: x, ObservedTime: at(3), Conditions: groupConds(at(3), "c")},
			{DeviceID: y, ObservedTime: at(3), Conditions: with(3, "c", condition.ProvisioningHealthy, condition.False)}}},
		{Sequence: 3, Devices: []DeviceUpdate{{DeviceID: x, ObservedTime: at(4), Conditions: groupConds(at(4), "dup")}}},
		{Sequence: 4, Devices: []DeviceUpdate{
			{DeviceID: y, ObservedTime: at(5), Conditions: groupConds(at(5), "d")},
			{DeviceID: y, ObservedTime: at(6), Conditions: with(6, "e", condition.CustomerReady, condition.False)}}},
	}
}

// siteState is what a user sees of a site after its batches.
func siteState(t *testing.T, url, site string, x, y string) string {
	t.Helper()
	var out string
	for _, q := range []string{
		`SELECT last_sequence FROM sites WHERE name = '%[1]s'`,
		`SELECT count(*) FROM condition_history h JOIN devices d ON d.id = h.device_id WHERE d.site = '%[1]s'`,
		`SELECT count(*) FROM status_history h JOIN devices d ON d.id = h.device_id WHERE d.site = '%[1]s'`,
		`SELECT count(*) FROM device_conditions c JOIN devices d ON d.id = c.device_id WHERE d.site = '%[1]s' AND c.message NOT IN ('c', 'e')`,
	} {
		out += fmt.Sprintf("%d ", pgtest.Count(t, url, fmt.Sprintf(q, site)))
	}
	for _, id := range []string{x, y} {
		out += fmt.Sprintf("%s ", pgtest.QueryString(t, url, fmt.Sprintf(`SELECT status || '/' || status_reason || '/' || (status_changed_at IS NOT NULL)::text FROM devices WHERE id = '%s'`, id)))
	}
	return out
}

// A site's consecutive batches committed in one group leave exactly what
// committing them one by one leaves, with each batch's own answer.
func TestGroupCarriesConsecutiveWritesOfASite(t *testing.T) {
	ctx := context.Background()
	s, url := newGroupStore(t)
	t0 := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Minute)
	single, grouped := openSite(t, s, "single"), openSite(t, s, "grouped")
	sx, sy, gx, gy := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()

	var want []BatchResult
	for _, b := range siteBatches(sx, sy, t0) {
		res, err := s.ApplyBatch(ctx, "single", single, b)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, res)
	}
	var items []*groupItem
	for _, b := range siteBatches(gx, gy, t0) {
		it := &groupItem{site: "grouped", epoch: grouped, batch: &b}
		if len(items) > 0 {
			it.prev = items[len(items)-1]
		}
		items = append(items, it)
	}
	if err := s.applyGroup(ctx, items); err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		if it.err != nil || it.bres != want[i] {
			t.Errorf("batch %d: result %+v err %v, want %+v as one by one", i, it.bres, it.err, want[i])
		}
	}
	g, w := siteState(t, url, "grouped", gx, gy), siteState(t, url, "single", sx, sy)
	t.Logf("one by one: %s; results %+v", w, want)
	if g != w {
		t.Errorf("grouped site %q, one by one %q", g, w)
	}
}

// A refused write fails the writes submitted after it on its link in the
// same group unwritten, as if they had been submitted one by one after
// it; another site's write in the group commits.
func TestGroupWriteAfterRefusedOneIsNotCommitted(t *testing.T) {
	ctx := context.Background()
	s, url := newGroupStore(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	a, b := openSite(t, s, "a"), openSite(t, s, "b")
	theirs := uuid.NewString()
	if _, err := s.ApplyBatch(ctx, "b", b, Batch{Sequence: 1, Devices: []DeviceUpdate{{DeviceID: theirs, ObservedTime: now, Conditions: groupConds(now, "b")}}}); err != nil {
		t.Fatal(err)
	}
	dev := func(id string) []DeviceUpdate {
		return []DeviceUpdate{{DeviceID: id, ObservedTime: now, Conditions: groupConds(now, "x")}}
	}
	first := &groupItem{site: "a", epoch: a, batch: &Batch{Sequence: 1, Devices: dev(theirs)}}
	second := &groupItem{site: "a", epoch: a, batch: &Batch{Sequence: 2, Devices: dev(uuid.NewString())}, prev: first}
	other := &groupItem{site: "b", epoch: b, batch: &Batch{Sequence: 2, Devices: dev(uuid.NewString())}}
	if err := s.applyGroup(ctx, []*groupItem{first, second, other}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(first.err, ErrWrongSite) || !errors.Is(second.err, ErrWrongSite) || other.err != nil {
		t.Fatalf("errors: first %v, second %v, other %v", first.err, second.err, other.err)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM devices WHERE site = 'a'`); n != 0 {
		t.Errorf("%d devices written for site a", n)
	}
	if n := pgtest.Count(t, url, `SELECT last_sequence FROM sites WHERE name = 'a'`); n != 0 {
		t.Errorf("site a last_sequence %d, want 0", n)
	}
	if n := pgtest.Count(t, url, `SELECT last_sequence FROM sites WHERE name = 'b'`); n != 2 {
		t.Errorf("site b last_sequence %d, want 2", n)
	}
}

// When a group's transaction fails and its writes are committed one by
// one, a write after the failed one on the same link is not attempted.
func TestGroupRetryKeepsWriteAfterFailedOneUnwritten(t *testing.T) {
	s, url := newGroupStore(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	a, b := openSite(t, s, "a"), openSite(t, s, "b")
	broken := groupConds(now, "x")
	broken[0].Status = "Bogus"
	first := &groupItem{site: "a", epoch: a, batch: &Batch{Sequence: 1, Devices: []DeviceUpdate{{DeviceID: uuid.NewString(), ObservedTime: now, Conditions: broken}}}, done: make(chan struct{})}
	second := &groupItem{site: "a", epoch: a, batch: &Batch{Sequence: 2, Devices: []DeviceUpdate{{DeviceID: uuid.NewString(), ObservedTime: now, Conditions: groupConds(now, "x")}}}, prev: first, done: make(chan struct{})}
	other := &groupItem{site: "b", epoch: b, batch: &Batch{Sequence: 1, Devices: []DeviceUpdate{{DeviceID: uuid.NewString(), ObservedTime: now, Conditions: groupConds(now, "x")}}}, done: make(chan struct{})}
	s.group.commit(s, []*groupItem{first, second, other})
	if first.err == nil || second.err == nil || other.err != nil {
		t.Fatalf("errors: first %v, second %v, other %v; want first's and second's", first.err, second.err, other.err)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM devices WHERE site = 'a'`); n != 0 {
		t.Errorf("%d devices written for site a", n)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM devices WHERE site = 'b'`); n != 1 {
		t.Errorf("%d devices written for site b, want 1", n)
	}
}

// Batches submitted back to back with SubmitBatch (each after the one
// before) all commit, in order, sharing groups.
func TestSubmitBatchPipelines(t *testing.T) {
	ctx := context.Background()
	s, url := newGroupStore(t)
	epoch := openSite(t, s, "p")
	id := uuid.NewString()
	t0 := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Minute)
	const n = 40
	var ps []*Pending
	var prev *Pending
	for seq := 1; seq <= n; seq++ {
		at := t0.Add(time.Duration(seq) * time.Millisecond)
		prev = s.SubmitBatch(ctx, "p", epoch, Batch{Sequence: uint64(seq), Devices: []DeviceUpdate{{DeviceID: id, ObservedTime: at, Conditions: groupConds(at, fmt.Sprint("batch ", seq))}}}, prev)
		ps = append(ps, prev)
	}
	for i, p := range ps {
		if err := p.Wait(ctx); err != nil {
			t.Fatalf("batch %d: %v", i+1, err)
		}
		if p.BatchResult().Duplicate {
			t.Errorf("batch %d acked as a duplicate", i+1)
		}
	}
	if got := pgtest.Count(t, url, `SELECT last_sequence FROM sites WHERE name = 'p'`); got != n {
		t.Errorf("last_sequence %d, want %d", got, n)
	}
	if got := pgtest.Count(t, url, `SELECT count(*) FROM condition_history`); got != n*len(condition.Types) {
		t.Errorf("history rows %d, want %d", got, n*len(condition.Types))
	}
	if got := pgtest.Count(t, url, fmt.Sprintf(`SELECT count(*) FROM device_conditions WHERE message <> 'batch %d'`, n)); got != 0 {
		t.Errorf("%d conditions not at the last batch", got)
	}
	groups, writes := s.GroupStats()
	t.Logf("%d batches in %d group transactions", writes, groups)
}

package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/testlog"
)

func newGroupStore(t *testing.T) (*Store, string) { return newGroupStoreTB(t) }

func newGroupStoreTB(t testing.TB) (*Store, string) {
	t.Helper()
	url := pgtest.MigratedDatabase(t)
	s, err := Open(context.Background(), url, testlog.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, url
}

func groupConds(at time.Time, msg string) []condition.Condition {
	var out []condition.Condition
	for _, t := range condition.Types {
		st := condition.True
		if t == condition.InValidationPool || t == condition.InstanceAllocated || t == condition.CustomerAllocated {
			st = condition.False
		}
		out = append(out, condition.Condition{Type: t, Status: st, Reason: "Test", Message: msg, LastTransitionTime: at, ObservedTime: at})
	}
	return out
}

func openSite(t *testing.T, s *Store, site string) int64 {
	t.Helper()
	sess, err := s.OpenLink(context.Background(), LinkHello{Site: site, BootID: "b", Replica: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	return sess.Epoch
}

// One group holding a good batch, a fenced one, a duplicate, one naming
// another site's device, one creating a device another batch of the same
// group creates, an unknown site and a site-condition set: each gets its
// own answer, and only the good writes land.
func TestGroupRefusalsStayWithTheirSite(t *testing.T) {
	ctx := context.Background()
	s, url := newGroupStore(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	epochs := map[string]int64{}
	for _, site := range []string{"good", "fenced", "dup", "wrong", "twin", "conds"} {
		epochs[site] = openSite(t, s, site)
	}
	known, shared := uuid.NewString(), uuid.NewString()
	if _, err := s.ApplyBatch(ctx, "good", epochs["good"], Batch{Sequence: 1, Devices: []DeviceUpdate{{DeviceID: known, ObservedTime: now, Conditions: groupConds(now, "first")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyBatch(ctx, "dup", epochs["dup"], Batch{Sequence: 5, Devices: []DeviceUpdate{{DeviceID: uuid.NewString(), ObservedTime: now, Conditions: groupConds(now, "first")}}}); err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Second)
	dev := func(id string) []DeviceUpdate {
		return []DeviceUpdate{{DeviceID: id, ObservedTime: later, Conditions: groupConds(later, "second")}}
	}
	items := []*groupItem{
		{site: "good", epoch: epochs["good"], batch: &Batch{Sequence: 2, Devices: append(dev(known), dev(shared)...)}},
		{site: "fenced", epoch: epochs["fenced"] - 1, batch: &Batch{Sequence: 1, Devices: dev(uuid.NewString())}},
		{site: "dup", epoch: epochs["dup"], batch: &Batch{Sequence: 5, Devices: dev(uuid.NewString())}},
		{site: "wrong", epoch: epochs["wrong"], batch: &Batch{Sequence: 1, Devices: append(dev(uuid.NewString()), dev(known)...)}},
		{site: "twin", epoch: epochs["twin"], batch: &Batch{Sequence: 1, Devices: dev(shared)}},
		{site: "nowhere", epoch: 1, batch: &Batch{Sequence: 1, Devices: dev(uuid.NewString())}},
		{site: "conds", epoch: epochs["conds"], conds: []condition.Condition{{Type: condition.SiteTypes[0], Status: condition.True, Reason: "Ok", LastTransitionTime: later, ObservedTime: later}}},
	}
	if err := s.applyGroup(ctx, items); err != nil {
		t.Fatal(err)
	}
	want := []error{nil, ErrFenced, nil, ErrWrongSite, ErrWrongSite, ErrNotFound, nil}
	for i, it := range items {
		if want[i] == nil && it.err != nil || want[i] != nil && !errors.Is(it.err, want[i]) {
			t.Errorf("item %d (%s): err %v, want %v", i, it.site, it.err, want[i])
		}
	}
	if !items[2].bres.Duplicate || items[0].bres.Duplicate {
		t.Errorf("duplicate flags: good %v dup %v", items[0].bres.Duplicate, items[2].bres.Duplicate)
	}
	if !items[6].sres.Applied {
		t.Errorf("site conditions not applied: %+v", items[6].sres)
	}
	// Seven history rows for the known device's first batch, seven each for
	// the second batch's two devices; nothing from the refused batches.
	if n := pgtest.Count(t, url, `SELECT count(*) FROM condition_history`); n != 7+7+7+7 {
		t.Errorf("condition history rows %d, want 28 (dup's first batch, good's two)", n)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM devices WHERE site IN ('fenced', 'wrong', 'twin', 'nowhere')`); n != 0 {
		t.Errorf("%d devices written by refused batches", n)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM devices WHERE site = 'good' AND status = 'AVAILABLE'`); n != 2 {
		t.Errorf("good site: %d AVAILABLE devices, want 2", n)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM status_history`); n != 3 {
		t.Errorf("status history rows %d, want 3 (one per device reaching AVAILABLE)", n)
	}
	seqs := map[string]int{"good": 2, "fenced": 0, "dup": 5, "wrong": 0, "twin": 0}
	for site, seq := range seqs {
		if n := pgtest.Count(t, url, fmt.Sprintf(`SELECT last_sequence FROM sites WHERE name = '%s'`, site)); n != seq {
			t.Errorf("site %s last_sequence %d, want %d", site, n, seq)
		}
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM site_conditions WHERE site = 'conds'`); n != 1 {
		t.Errorf("site conditions rows %d, want 1", n)
	}
}

// Many sites committing at once share transactions and lose nothing: every
// site's sequence ends at its last batch and every change is one history
// row.
func TestGroupCommitConcurrentSites(t *testing.T) {
	ctx := context.Background()
	s, url := newGroupStore(t)
	const sites, batches, devices = 40, 15, 5
	var wg sync.WaitGroup
	errs := make(chan error, sites)
	for i := range sites {
		site := fmt.Sprintf("site-%02d", i)
		epoch := openSite(t, s, site)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]string, devices)
			for d := range ids {
				ids[d] = uuid.NewString()
			}
			t0 := time.Now().UTC().Truncate(time.Microsecond)
			for seq := 1; seq <= batches; seq++ {
				at := t0.Add(time.Duration(seq) * time.Millisecond)
				b := Batch{Sequence: uint64(seq)}
				for _, id := range ids {
					b.Devices = append(b.Devices, DeviceUpdate{DeviceID: id, ObservedTime: at, Conditions: groupConds(at, fmt.Sprint("batch ", seq))})
				}
				if _, err := s.ApplyBatch(ctx, site, epoch, b); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM condition_history`); n != sites*batches*devices*len(condition.Types) {
		t.Errorf("history rows %d, want %d", n, sites*batches*devices*len(condition.Types))
	}
	if n := pgtest.Count(t, url, fmt.Sprintf(`SELECT count(*) FROM sites WHERE last_sequence = %d`, batches)); n != sites {
		t.Errorf("%d sites at sequence %d, want %d", n, batches, sites)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM device_conditions WHERE message <> 'batch 15'`); n != 0 {
		t.Errorf("%d conditions not at the last batch", n)
	}
	groups, writes := s.GroupStats()
	t.Logf("%d batches in %d group transactions", writes, groups)
	if writes != sites*batches || groups >= writes {
		t.Errorf("%d writes in %d groups: want %d writes, fewer groups than writes", writes, groups, sites*batches)
	}
}

// A write the database refuses (here a condition status the schema's CHECK
// rejects, which the link's validation never lets through) fails the group's
// transaction; the group is then committed write by write, so only that
// write fails.
func TestGroupFailureIsRetriedWithoutTheOffender(t *testing.T) {
	s, url := newGroupStore(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	good, bad := openSite(t, s, "good"), openSite(t, s, "bad")
	broken := groupConds(now, "x")
	broken[0].Status = "Bogus"
	items := []*groupItem{
		{site: "bad", epoch: bad, batch: &Batch{Sequence: 1, Devices: []DeviceUpdate{{DeviceID: uuid.NewString(), ObservedTime: now, Conditions: broken}}}, done: make(chan struct{})},
		{site: "good", epoch: good, batch: &Batch{Sequence: 1, Devices: []DeviceUpdate{{DeviceID: uuid.NewString(), ObservedTime: now, Conditions: groupConds(now, "x")}}}, done: make(chan struct{})},
	}
	s.group.commit(s, items)
	if items[0].err == nil || items[1].err != nil {
		t.Fatalf("errors: bad %v, good %v; want only bad's", items[0].err, items[1].err)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM condition_history`); n != 7 {
		t.Errorf("history rows %d, want 7 (the good batch)", n)
	}
	if n := pgtest.Count(t, url, `SELECT last_sequence FROM sites WHERE name = 'good'`); n != 1 {
		t.Errorf("good site sequence %d, want 1", n)
	}
	if n := pgtest.Count(t, url, `SELECT last_sequence FROM sites WHERE name = 'bad'`); n != 0 {
		t.Errorf("bad site sequence %d, want 0", n)
	}
}

// A light site's write queued behind a flooding site's writes is taken
// first, and only light sites' writes go to the express worker (take with
// lightOnly): a site sending its usual trickle never commits in, or waits
// for, another site's large group.
func TestGroupTakesLightSitesFirst(t *testing.T) {
	var g groupCommitter
	g.siteWaiting = map[string]int{}
	queue := func(site string, devices int) *groupItem {
		b := &Batch{Devices: make([]DeviceUpdate, devices)}
		it := &groupItem{site: site, batch: b, ctx: context.Background(), done: make(chan struct{})}
		g.waiting = append(g.waiting, it)
		g.siteWaiting[site] += it.devices()
		return it
	}
	var storm []*groupItem
	for range 6 {
		storm = append(storm, queue("storm", 100))
	}
	calm := queue("calm", 1)

	express := g.take(true)
	if len(express) != 1 || express[0] != calm {
		t.Fatalf("express worker took %d writes, want the calm site's one alone", len(express))
	}
	if g.take(true) != nil {
		t.Fatal("express worker took a flooding site's write")
	}
	calm2 := queue("calm", 1)
	group := g.take(false)
	if len(group) == 0 || group[0] != calm2 {
		t.Fatalf("a worker's group does not start with the calm site's write: %d writes", len(group))
	}
	// The rest of the group is the storm's, in their order, within the
	// worker's share of what waits (601 devices / 2 workers = 301).
	if len(group) != 4 || group[1] != storm[0] || group[2] != storm[1] || group[3] != storm[2] {
		t.Fatalf("group = %d writes, want the calm write and the storm's first three", len(group))
	}
	if got := g.siteWaiting["storm"]; got != 300 {
		t.Fatalf("storm waiting = %d device updates, want 300", got)
	}
	if _, ok := g.siteWaiting["calm"]; ok {
		t.Fatal("calm site still counted as waiting")
	}
}

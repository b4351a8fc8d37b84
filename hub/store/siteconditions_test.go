package store_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
)

func siteCond(t condition.Type, st condition.Status, reason string, at time.Time) condition.Condition {
	return condition.Condition{Type: t, Status: st, Reason: reason, Message: reason + " message", LastTransitionTime: at, ObservedTime: at}
}

// siteOf returns the ListSites entry of name.
func siteOf(t *testing.T, s *store.Store, name string) store.Site {
	t.Helper()
	sites, err := s.ListSites(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sites {
		if st.Name == name {
			return st
		}
	}
	t.Fatalf("site %q not listed", name)
	return store.Site{}
}

func TestSiteConditionsReplaceKeepTransitionTimeAndIgnoreOlderSets(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	sess := open(t, s, "site-a")
	t0 := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)
	t1, t2 := t0.Add(10*time.Minute), t0.Add(20*time.Minute)

	// The satellite's first set: listed in SiteTypes order whatever the sent order.
	first := []condition.Condition{
		siteCond(condition.OrphanDetection, condition.True, "Compared", t0),
		siteCond(condition.OpenStackAuthenticated, condition.True, "Authenticated", t0),
	}
	if res, err := s.ReplaceSiteConditions(ctx, "site-a", sess.Epoch, first); err != nil || !res.Applied || !res.Changed {
		t.Fatalf("first set: %+v err=%v", res, err)
	}
	got := siteOf(t, s, "site-a").Conditions
	if len(got) != 2 || got[0].Type != condition.OpenStackAuthenticated || got[1].Type != condition.OrphanDetection ||
		got[1].Message != "Compared message" || !got[0].LastTransitionTime.Equal(t0) {
		t.Fatalf("after first set: %+v", got)
	}

	// Authentication still True (a restarted satellite sends its own, later
	// transition time): the stored transition time stays. OrphanDetection
	// turns False: its transition time moves.
	second := []condition.Condition{
		siteCond(condition.OpenStackAuthenticated, condition.True, "Authenticated", t1),
		siteCond(condition.OrphanDetection, condition.False, "HypervisorFieldHidden", t1),
	}
	if res, err := s.ReplaceSiteConditions(ctx, "site-a", sess.Epoch, second); err != nil || !res.Applied || !res.Changed {
		t.Fatalf("second set: %+v err=%v", res, err)
	}
	got = siteOf(t, s, "site-a").Conditions
	if !got[0].LastTransitionTime.Equal(t0) || !got[0].ObservedTime.Equal(t1) {
		t.Fatalf("unchanged status: transition %v observed %v, want %v and %v", got[0].LastTransitionTime, got[0].ObservedTime, t0, t1)
	}
	if got[1].Status != condition.False || got[1].Reason != "HypervisorFieldHidden" || !got[1].LastTransitionTime.Equal(t1) {
		t.Fatalf("changed status: %+v", got[1])
	}

	// A replayed older set changes nothing.
	stale := []condition.Condition{siteCond(condition.OpenStackAuthenticated, condition.False, "AuthenticationFailed", t0.Add(time.Minute))}
	res, err := s.ReplaceSiteConditions(ctx, "site-a", sess.Epoch, stale)
	if err != nil || res.Applied || res.Changed {
		t.Fatalf("older set: %+v err=%v, want ignored", res, err)
	}
	if again := siteOf(t, s, "site-a").Conditions; !reflect.DeepEqual(again, got) {
		t.Fatalf("older set changed the stored one:\n%+v\nwant\n%+v", again, got)
	}

	// A newer set without OrphanDetection replaces the whole set.
	third := []condition.Condition{siteCond(condition.OpenStackAuthenticated, condition.False, "AuthenticationFailed", t2)}
	if res, err := s.ReplaceSiteConditions(ctx, "site-a", sess.Epoch, third); err != nil || !res.Applied || !res.Changed {
		t.Fatalf("third set: %+v err=%v", res, err)
	}
	got = siteOf(t, s, "site-a").Conditions
	if len(got) != 1 || got[0].Status != condition.False || !got[0].LastTransitionTime.Equal(t2) {
		t.Fatalf("after third set: %+v", got)
	}

	// An empty set clears them.
	if _, err := s.ReplaceSiteConditions(ctx, "site-a", sess.Epoch, nil); err != nil {
		t.Fatal(err)
	}
	if got := siteOf(t, s, "site-a").Conditions; len(got) != 0 {
		t.Fatalf("after empty set: %+v", got)
	}
}

func TestSiteConditionsOfSupersededLinkAreRefused(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	old := open(t, s, "site-a")
	newer := open(t, s, "site-a")
	now := time.Now().UTC().Truncate(time.Microsecond)
	mine := []condition.Condition{siteCond(condition.OpenStackAuthenticated, condition.True, "Authenticated", now)}
	if _, err := s.ReplaceSiteConditions(ctx, "site-a", newer.Epoch, mine); err != nil {
		t.Fatal(err)
	}
	// The old link's set is newer by observed time, but its epoch is fenced.
	theirs := []condition.Condition{siteCond(condition.OpenStackAuthenticated, condition.False, "AuthenticationFailed", now.Add(time.Minute))}
	if _, err := s.ReplaceSiteConditions(ctx, "site-a", old.Epoch, theirs); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("superseded link: %v, want ErrFenced", err)
	}
	if got := siteOf(t, s, "site-a").Conditions; len(got) != 1 || got[0].Status != condition.True {
		t.Fatalf("superseded link overwrote the set: %+v", got)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM site_conditions`); n != 1 {
		t.Fatalf("site_conditions rows %d, want 1", n)
	}
	// Another site's set is its own.
	b := open(t, s, "site-b")
	if _, err := s.ReplaceSiteConditions(ctx, "site-b", b.Epoch, theirs); err != nil {
		t.Fatal(err)
	}
	if a, bb := siteOf(t, s, "site-a").Conditions, siteOf(t, s, "site-b").Conditions; a[0].Status != condition.True || bb[0].Status != condition.False {
		t.Fatalf("site-a %+v site-b %+v", a, bb)
	}
}

func TestInstanceMismatchFactsFilterAndCount(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	a, b := open(t, s, "site-a"), open(t, s, "site-b")
	now := time.Now().UTC().Truncate(time.Microsecond)
	seen := now.Add(-10 * time.Minute)
	orphan := store.InstanceMismatch{Kind: store.MismatchNovaUnknown, IronicInstanceUUID: uuid.NewString(),
		NovaServerID: uuid.NewString(), NovaServerStatus: "DELETED", NovaProjectID: "p1", FirstSeenTime: seen}
	unaware := store.InstanceMismatch{Kind: store.MismatchNodeUnaware, NovaServerID: uuid.NewString(),
		NovaServerStatus: "ACTIVE", FirstSeenTime: seen}

	// site-a: two devices with mismatches (one has two), one without, one
	// with mismatches that is then removed; site-b: one with a mismatch.
	withTwo, withOne, clean, gone := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	dev := func(id string, ms ...store.InstanceMismatch) store.DeviceUpdate {
		return store.DeviceUpdate{DeviceID: id, Conditions: conds(now, nil), ObservedTime: now,
			Facts: &store.Facts{Name: "n-" + id[:4], InstanceMismatches: ms}}
	}
	if _, err := s.ApplyBatch(ctx, "site-a", a.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{
		dev(withTwo, orphan, unaware), dev(withOne, unaware), dev(clean), dev(gone, orphan),
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyBatch(ctx, "site-a", a.Epoch, store.Batch{Sequence: 2, Devices: []store.DeviceUpdate{
		{DeviceID: gone, Removed: true, ObservedTime: now},
	}}); err != nil {
		t.Fatal(err)
	}
	other := uuid.NewString()
	if _, err := s.ApplyBatch(ctx, "site-b", b.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{dev(other, orphan)}}); err != nil {
		t.Fatal(err)
	}
	// A row written before instance_mismatches existed.
	legacy := uuid.NewString()
	pgtest.MustExec(t, url, `INSERT INTO devices (id, site, name, facts) VALUES ($1, 'site-a', 'old', '{"name":"old","provision_state":"active"}')`, legacy)

	d, err := s.GetDevice(ctx, withTwo)
	if err != nil {
		t.Fatal(err)
	}
	if want := []store.InstanceMismatch{orphan, unaware}; !reflect.DeepEqual(d.Facts.InstanceMismatches, want) {
		t.Fatalf("round trip:\n%+v\nwant\n%+v", d.Facts.InstanceMismatches, want)
	}
	if d, err := s.GetDevice(ctx, legacy); err != nil || d.Facts.InstanceMismatches != nil || d.Facts.ProvisionState != "active" {
		t.Fatalf("legacy facts: %+v %v", d.Facts, err)
	}

	ids := func(f store.DeviceFilter) []string {
		t.Helper()
		var out []string
		for {
			page, more, err := s.ListDevices(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range page {
				out = append(out, d.ID)
			}
			if !more {
				return out
			}
			f.After = page[len(page)-1].ID
		}
	}
	sorted := func(xs ...string) []string { return slices.Sorted(slices.Values(xs)) }
	if got, want := ids(store.DeviceFilter{InstanceMismatch: true, Limit: 1}), sorted(withTwo, withOne, other); !reflect.DeepEqual(got, want) {
		t.Fatalf("mismatch filter paged by 1: %v, want %v", got, want)
	}
	if got, want := ids(store.DeviceFilter{InstanceMismatch: true, Site: "site-a", Limit: 100}), sorted(withTwo, withOne); !reflect.DeepEqual(got, want) {
		t.Fatalf("mismatch filter in site-a: %v, want %v", got, want)
	}
	if got, want := ids(store.DeviceFilter{InstanceMismatch: true, Site: "site-a", IncludeRemoved: true, Limit: 100}), sorted(withTwo, withOne, gone); !reflect.DeepEqual(got, want) {
		t.Fatalf("mismatch filter with removed: %v, want %v", got, want)
	}
	if got := ids(store.DeviceFilter{Limit: 100}); len(got) != 5 {
		t.Fatalf("no filter: %d devices, want 5", len(got))
	}
	if n := siteOf(t, s, "site-a").InstanceMismatchCount; n != 2 {
		t.Fatalf("site-a mismatch count %d, want 2 (removed device not counted, a device with two counted once)", n)
	}
	if n := siteOf(t, s, "site-b").InstanceMismatchCount; n != 1 {
		t.Fatalf("site-b mismatch count %d, want 1", n)
	}

	// The orphan is repaired: the next facts carry no mismatch and the device leaves the filter.
	if _, err := s.ApplyBatch(ctx, "site-a", a.Epoch, store.Batch{Sequence: 3, Devices: []store.DeviceUpdate{dev(withOne)}}); err != nil {
		t.Fatal(err)
	}
	if got, want := ids(store.DeviceFilter{InstanceMismatch: true, Site: "site-a", Limit: 100}), []string{withTwo}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after repair: %v, want %v", got, want)
	}
	if n := siteOf(t, s, "site-a").InstanceMismatchCount; n != 1 {
		t.Fatalf("site-a mismatch count after repair %d, want 1", n)
	}
}

func TestSiteConditionsChangedOnlyOnStatusReasonOrTypes(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	sess := open(t, s, "site-a")
	t0 := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)
	set := func(at time.Time, cs ...condition.Condition) store.SiteConditionsResult {
		t.Helper()
		res, err := s.ReplaceSiteConditions(ctx, "site-a", sess.Epoch, cs)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	auth := func(st condition.Status, reason string, at time.Time) condition.Condition {
		return siteCond(condition.OpenStackAuthenticated, st, reason, at)
	}
	if res := set(t0, auth(condition.True, "Authenticated", t0)); !res.Applied || !res.Changed {
		t.Fatalf("first set: %+v", res)
	}
	// The same set again, observed later and with another message: applied, not a change.
	again := auth(condition.True, "Authenticated", t0.Add(time.Minute))
	again.Message = "another message"
	if res := set(t0, again); !res.Applied || res.Changed {
		t.Fatalf("resent set: %+v, want applied and unchanged", res)
	}
	// Same status, other reason: a change.
	if res := set(t0, auth(condition.True, "Reauthenticated", t0.Add(2*time.Minute))); !res.Applied || !res.Changed {
		t.Fatalf("new reason: %+v", res)
	}
	// A type added, then removed: changes.
	orphan := siteCond(condition.OrphanDetection, condition.True, "Compared", t0.Add(3*time.Minute))
	if res := set(t0, auth(condition.True, "Reauthenticated", t0.Add(3*time.Minute)), orphan); !res.Changed {
		t.Fatalf("type added: %+v", res)
	}
	if res := set(t0, auth(condition.True, "Reauthenticated", t0.Add(4*time.Minute))); !res.Applied || !res.Changed {
		t.Fatalf("type removed: %+v", res)
	}
}

// Times stored in the far future (by a hub before the link clamped
// satellite clocks) must not freeze a site: they count as now.
func TestStoredFutureTimesDoNotFreezeConditions(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	sess := open(t, s, "site-a")
	future := time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC)
	if res, err := s.ReplaceSiteConditions(ctx, "site-a", sess.Epoch, []condition.Condition{
		siteCond(condition.OpenStackAuthenticated, condition.False, "AuthenticationFailed", future)}); err != nil || !res.Applied {
		t.Fatalf("future set: %+v %v", res, err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond).Add(time.Second)
	if res, err := s.ReplaceSiteConditions(ctx, "site-a", sess.Epoch, []condition.Condition{
		siteCond(condition.OpenStackAuthenticated, condition.True, "Authenticated", now)}); err != nil || !res.Applied || !res.Changed {
		t.Fatalf("genuine set after a future one: %+v %v, want applied", res, err)
	}
	if got := siteOf(t, s, "site-a").Conditions; len(got) != 1 || got[0].Status != condition.True || !got[0].ObservedTime.Equal(now) {
		t.Fatalf("after genuine set: %+v", got)
	}
	// An older replay is still ignored.
	if res, err := s.ReplaceSiteConditions(ctx, "site-a", sess.Epoch, []condition.Condition{
		siteCond(condition.OpenStackAuthenticated, condition.False, "AuthenticationFailed", now.Add(-time.Hour))}); err != nil || res.Applied {
		t.Fatalf("older set: %+v %v, want ignored", res, err)
	}

	// Device conditions and the device's observed time likewise.
	dev := uuid.NewString()
	if _, err := s.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{{
		DeviceID: dev, ObservedTime: future, Conditions: conds(future, map[condition.Type]condition.Status{condition.MaintenanceClear: condition.False}),
	}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 2, Devices: []store.DeviceUpdate{{
		DeviceID: dev, ObservedTime: now, Conditions: conds(now, nil),
	}}}); err != nil {
		t.Fatal(err)
	}
	d, err := s.GetDevice(ctx, dev)
	if err != nil {
		t.Fatal(err)
	}
	if d.ObservedAt == nil || !d.ObservedAt.Equal(now) {
		t.Fatalf("device observed_at %v, want %v", d.ObservedAt, now)
	}
	for _, c := range d.Conditions {
		if c.Type == condition.MaintenanceClear && (c.Status != condition.True || !c.ObservedTime.Equal(now)) {
			t.Fatalf("MaintenanceClear after a genuine batch: %+v", c)
		}
	}
}

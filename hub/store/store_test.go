package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

func newStore(t *testing.T) (*store.Store, string) { return newBenchStore(t) }

func newBenchStore(t testing.TB) (*store.Store, string) {
	t.Helper()
	return storetest.New(t, testlog.Discard())
}

func conds(at time.Time, overrides map[condition.Type]condition.Status) []condition.Condition {
	var out []condition.Condition
	good := map[condition.Type]condition.Status{
		condition.Enrolled: condition.True, condition.ProvisioningHealthy: condition.True,
		condition.MaintenanceClear: condition.True, condition.InValidationPool: condition.False,
		condition.InstanceAllocated: condition.False, condition.CustomerAllocated: condition.False,
		condition.CustomerReady: condition.True,
	}
	for _, t := range condition.Types {
		st := good[t]
		if o, ok := overrides[t]; ok {
			st = o
		}
		out = append(out, condition.Condition{Type: t, Status: st, Reason: "Test" + string(st), LastTransitionTime: at, ObservedTime: at})
	}
	return out
}

func open(t *testing.T, s *store.Store, site string) store.LinkSession {
	t.Helper()
	sess, err := s.OpenLink(context.Background(), store.LinkHello{Site: site, BootID: "b", Replica: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

func TestMigrateIsIdempotent(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	applied, err := store.Migrate(ctx, url)
	if err != nil || len(applied) == 0 {
		t.Fatalf("first migrate: %v %v", applied, err)
	}
	again, err := store.Migrate(ctx, url)
	if err != nil || len(again) != 0 {
		t.Fatalf("second migrate applied %v, err %v; want nothing", again, err)
	}
}

func TestBatchCommitsConditionsAndStatus(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	sess := open(t, s, "site-a")
	now := time.Now().UTC().Truncate(time.Microsecond)
	okID, badID := uuid.NewString(), uuid.NewString()
	res, err := s.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{
		{DeviceID: okID, Conditions: conds(now, nil), ObservedTime: now, Facts: &store.Facts{Name: "node-001"}},
		{DeviceID: badID, Conditions: conds(now, map[condition.Type]condition.Status{condition.ProvisioningHealthy: condition.False}), ObservedTime: now},
	}})
	if err != nil || res.Duplicate {
		t.Fatalf("apply: %+v %v", res, err)
	}
	d, err := s.GetDevice(ctx, okID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != status.Available || d.Name != "node-001" || len(d.Conditions) != 7 {
		t.Fatalf("device: %+v", d)
	}
	d, _ = s.GetDevice(ctx, badID)
	if d.Status != status.Faulted {
		t.Fatalf("status %s, want FAULTED", d.Status)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM status_history`); n != 2 {
		t.Fatalf("status history rows %d, want 2", n)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM condition_history`); n != 14 {
		t.Fatalf("condition history rows %d, want 14", n)
	}
}

func TestDuplicateAndOlderBatchesChangeNothing(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	sess := open(t, s, "site-a")
	id := uuid.NewString()
	t1 := time.Now().UTC().Truncate(time.Microsecond)
	t0 := t1.Add(-time.Minute)
	if _, err := s.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 5, Devices: []store.DeviceUpdate{{DeviceID: id, Conditions: conds(t1, nil), ObservedTime: t1}}}); err != nil {
		t.Fatal(err)
	}
	before := pgtest.Count(t, url, `SELECT count(*) FROM condition_history`)
	// Same sequence again, different content: a duplicate, no effect.
	res, err := s.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 5, Devices: []store.DeviceUpdate{{DeviceID: id,
		Conditions: conds(t1, map[condition.Type]condition.Status{condition.MaintenanceClear: condition.False}), ObservedTime: t1}}})
	if err != nil || !res.Duplicate {
		t.Fatalf("duplicate: %+v %v", res, err)
	}
	// A newer sequence carrying an older observation: ignored per condition.
	if _, err := s.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 6, Devices: []store.DeviceUpdate{{DeviceID: id,
		Conditions: conds(t0, map[condition.Type]condition.Status{condition.MaintenanceClear: condition.False}), ObservedTime: t0}}}); err != nil {
		t.Fatal(err)
	}
	d, _ := s.GetDevice(ctx, id)
	if d.Status != status.Available {
		t.Fatalf("status moved backwards to %s", d.Status)
	}
	if after := pgtest.Count(t, url, `SELECT count(*) FROM condition_history`); after != before {
		t.Fatalf("history grew from %d to %d", before, after)
	}
	sess2 := open(t, s, "site-a")
	if sess2.LastSequence != 6 {
		t.Fatalf("last sequence %d, want 6", sess2.LastSequence)
	}
}

func TestFencedLinkCannotWrite(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	old := open(t, s, "site-a")
	open(t, s, "site-a")
	_, err := s.ApplyBatch(ctx, "site-a", old.Epoch, store.Batch{Sequence: 1})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("got %v, want ErrFenced", err)
	}
}

func TestBatchWithDeviceOfOtherSiteChangesNothing(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	a, b := open(t, s, "site-a"), open(t, s, "site-b")
	now := time.Now().UTC()
	foreign := uuid.NewString()
	if _, err := s.ApplyBatch(ctx, "site-a", a.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{{DeviceID: foreign, Conditions: conds(now, nil), ObservedTime: now}}}); err != nil {
		t.Fatal(err)
	}
	mine := uuid.NewString()
	_, err := s.ApplyBatch(ctx, "site-b", b.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{
		{DeviceID: mine, Conditions: conds(now, nil), ObservedTime: now},
		{DeviceID: foreign, Conditions: conds(now, nil), ObservedTime: now},
	}})
	if !errors.Is(err, store.ErrWrongSite) {
		t.Fatalf("got %v, want ErrWrongSite", err)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM devices WHERE site = 'site-b'`); n != 0 {
		t.Fatalf("site-b has %d devices after a refused batch", n)
	}
	if n := pgtest.Count(t, url, `SELECT last_sequence FROM sites WHERE name = 'site-b'`); n != 0 {
		t.Fatalf("site-b sequence advanced to %d", n)
	}
}

func TestSnapshotMarksUnseenDevicesRemoved(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	sess := open(t, s, "site-a")
	now := time.Now().UTC()
	keep, gone := uuid.NewString(), uuid.NewString()
	upd := func(id string) store.DeviceUpdate {
		return store.DeviceUpdate{DeviceID: id, Conditions: conds(now, nil), ObservedTime: now}
	}
	if _, err := s.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 1, SnapshotID: "s1", SnapshotFinal: true, Devices: []store.DeviceUpdate{upd(keep), upd(gone)}}); err != nil {
		t.Fatal(err)
	}
	// A two-part snapshot that mentions only keep.
	if _, err := s.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 2, SnapshotID: "s2", Devices: []store.DeviceUpdate{upd(keep)}}); err != nil {
		t.Fatal(err)
	}
	d, _ := s.GetDevice(ctx, gone)
	if d.Removed {
		t.Fatal("device removed before the snapshot's final part")
	}
	if _, err := s.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 3, SnapshotID: "s2", SnapshotFinal: true}); err != nil {
		t.Fatal(err)
	}
	d, err := s.GetDevice(ctx, gone)
	if err != nil || !d.Removed || d.RemovedAt == nil {
		t.Fatalf("vanished device: %+v %v; want removed and kept", d, err)
	}
	if d, _ := s.GetDevice(ctx, keep); d.Removed {
		t.Fatal("device in snapshot marked removed")
	}
	list, _, _ := s.ListDevices(ctx, store.DeviceFilter{Limit: 10})
	if len(list) != 1 {
		t.Fatalf("list without removed: %d devices, want 1", len(list))
	}
	list, _, _ = s.ListDevices(ctx, store.DeviceFilter{Limit: 10, IncludeRemoved: true})
	if len(list) != 2 {
		t.Fatalf("list with removed: %d devices, want 2", len(list))
	}
}

func TestCommandLifecycle(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	sess := open(t, s, "site-a")
	now := time.Now().UTC()
	id := uuid.NewString()
	if _, err := s.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{{DeviceID: id, Conditions: conds(now, nil), ObservedTime: now}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetDesiredImpairment(ctx, uuid.NewString(), store.ImpairmentQuarantined, "op", "why", "operator-api"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown device: %v", err)
	}
	q1, err := s.SetDesiredImpairment(ctx, id, store.ImpairmentQuarantined, "op", "bad GPU", "operator-api")
	if err != nil || q1.Generation != 1 || q1.State != store.CommandPending {
		t.Fatalf("quarantine: %+v %v", q1, err)
	}
	if d, _ := s.GetDevice(ctx, id); d.Status != status.Quarantined {
		t.Fatalf("status %s, want QUARANTINED", d.Status)
	}
	policy := store.DeliveryPolicy{ResendAfter: time.Hour, FailureBackoff: time.Hour, MaxFailureBackoff: time.Hour}
	due, _ := s.DueCommands(ctx, "site-a", sess.Epoch, policy, false, 10)
	if len(due) != 1 || due[0].ID != q1.ID {
		t.Fatalf("due: %+v", due)
	}
	_ = s.MarkSent(ctx, q1.ID)
	if due, _ := s.DueCommands(ctx, "site-a", sess.Epoch, policy, false, 10); len(due) != 0 {
		t.Fatalf("sent command due again before timeout: %+v", due)
	}
	if due, _ := s.DueCommands(ctx, "site-a", sess.Epoch, policy, true, 10); len(due) != 1 {
		t.Fatalf("sent command not resent on reconnect: %+v", due)
	}
	// A newer link fences this one: it gets nothing to send.
	newer := open(t, s, "site-a")
	if due, _ := s.DueCommands(ctx, "site-a", sess.Epoch, policy, true, 10); len(due) != 0 {
		t.Fatalf("fenced link still gets commands: %+v", due)
	}
	sess = newer
	// A release supersedes the quarantine; the late quarantine result is ignored.
	r2, _ := s.SetDesiredImpairment(ctx, id, store.ImpairmentReleased, "op", "fixed", "operator-api")
	ignored, err := s.RecordResult(ctx, "site-a", store.CommandResult{CommandID: q1.ID, DeviceID: id, Generation: 1, Success: true})
	if err != nil || !ignored {
		t.Fatalf("late result: ignored=%v err=%v", ignored, err)
	}
	if c, _ := s.GetCommand(ctx, q1.ID); c.State != store.CommandSuperseded {
		t.Fatalf("old command state %s", c.State)
	}
	if _, err := s.RecordResult(ctx, "site-b", store.CommandResult{CommandID: r2.ID, DeviceID: id, Generation: 2, Success: true}); !errors.Is(err, store.ErrWrongSite) {
		t.Fatalf("result from other site: %v", err)
	}
	if _, err := s.RecordResult(ctx, "site-a", store.CommandResult{CommandID: r2.ID, DeviceID: id, Generation: 2, Success: false, Error: "placement 503"}); err != nil {
		t.Fatal(err)
	}
	d, _ := s.GetDevice(ctx, id)
	if d.LastCommandError != "placement 503" || d.Status != status.Available {
		t.Fatalf("after failure: %+v", d)
	}
	if due, _ := s.DueCommands(ctx, "site-a", sess.Epoch, policy, false, 10); len(due) != 0 {
		t.Fatalf("failed command retried before its backoff: %+v", due)
	}
	if _, err := s.RecordResult(ctx, "site-a", store.CommandResult{CommandID: r2.ID, DeviceID: id, Generation: 2, Success: true, Detail: "ok"}); err != nil {
		t.Fatal(err)
	}
	d, _ = s.GetDevice(ctx, id)
	if d.AppliedGeneration != 2 || d.LastCommandError != "" {
		t.Fatalf("after success: %+v", d)
	}
	hist, _ := s.ImpairmentHistory(ctx, id, 10)
	if len(hist) != 2 || hist[0].Desired != store.ImpairmentReleased || hist[1].Actor != "op" {
		t.Fatalf("history: %+v", hist)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM commands WHERE state = 'SUCCEEDED'`); n != 1 {
		t.Fatalf("succeeded commands: %d", n)
	}
}

func TestStaleSiteIsUnreachableAndRecovers(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	sess := open(t, s, "site-a")
	now := time.Now().UTC()
	id := uuid.NewString()
	if _, err := s.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{{DeviceID: id, Conditions: conds(now, nil), ObservedTime: now}}}); err != nil {
		t.Fatal(err)
	}
	pgtest.MustExec(t, url, `UPDATE sites SET last_seen_at = now() - interval '10 minutes'`)
	stale, err := s.MarkStaleSites(ctx, 3*time.Minute)
	if err != nil || len(stale) != 1 {
		t.Fatalf("stale: %v %v", stale, err)
	}
	d, _ := s.GetDevice(ctx, id)
	if d.Status != status.Unreachable || d.LastKnownStatus != status.Available || d.DesiredImpairment != store.ImpairmentNone {
		t.Fatalf("stale device: %+v", d)
	}
	if res, err := s.FlushLastSeen(ctx, []store.LastSeen{{Site: "site-a", Epoch: sess.Epoch}}); err != nil || len(res.Recovered) != 1 {
		t.Fatalf("heartbeat flush: %+v %v", res, err)
	}
	if d, _ := s.GetDevice(ctx, id); d.Status != status.Available {
		t.Fatalf("after heartbeat: %s", d.Status)
	}
}

func TestStatusReasonFollowsConditionWithoutNewHistory(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	sess := open(t, s, "site-a")
	id := uuid.NewString()
	t0 := time.Now().UTC().Truncate(time.Microsecond)
	failed := func(at time.Time, reason string) []condition.Condition {
		cs := conds(at, nil)
		cs[1] = condition.Condition{Type: condition.ProvisioningHealthy, Status: condition.False, Reason: reason, LastTransitionTime: at, ObservedTime: at}
		return cs
	}
	if _, err := s.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{{DeviceID: id, Conditions: failed(t0, "CleanFailed"), ObservedTime: t0}}}); err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(time.Minute)
	if _, err := s.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 2, Devices: []store.DeviceUpdate{{DeviceID: id, Conditions: failed(t1, "DeployFailed")[1:2], ObservedTime: t1}}}); err != nil {
		t.Fatal(err)
	}
	d, _ := s.GetDevice(ctx, id)
	if d.Status != status.Faulted || d.StatusReason != "ProvisioningHealthy=False: DeployFailed" {
		t.Fatalf("status %s reason %q", d.Status, d.StatusReason)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM status_history`); n != 1 {
		t.Fatalf("status history rows %d, want 1 (same status)", n)
	}
}

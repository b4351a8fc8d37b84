package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/pgtest"
)

// opSite links site (capabilities as given) and registers n devices of it,
// provision state "manageable"; it returns the session and the device ids.
func opSite(t *testing.T, s *store.Store, site string, n int) (store.LinkSession, []string) {
	t.Helper()
	ctx := context.Background()
	sess, err := s.OpenLink(ctx, store.LinkHello{Site: site, BootID: "b", Replica: "r1", Capabilities: []string{"operations"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var ids []string
	var ups []store.DeviceUpdate
	for i := 0; i < n; i++ {
		id := uuid.NewString()
		ids = append(ids, id)
		ups = append(ups, store.DeviceUpdate{DeviceID: id, Conditions: conds(now, nil), ObservedTime: now,
			Facts: &store.Facts{Name: site + "-node-" + string(rune('a'+i)), ProvisionState: "manageable"}})
	}
	if _, err := s.ApplyBatch(ctx, site, sess.Epoch, store.Batch{Sequence: 1, Devices: ups}); err != nil {
		t.Fatal(err)
	}
	return sess, ids
}

func newOp(site, dev string, kind store.OperationKind) store.NewOperation {
	return store.NewOperation{ID: uuid.NewString(), Site: site, DeviceID: dev, Kind: kind, Actor: "op", Reason: "test", Source: "127.0.0.1:1"}
}

var delivery = store.OperationDelivery{PerSiteLimit: 2, ResendAfter: time.Hour, MaxResendAfter: time.Hour}

func TestOperationsOneActivePerDeviceAndNothingStoredOnConflict(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	_, devs := opSite(t, s, "site-a", 2)
	if _, _, err := s.CreateOperations(ctx, []store.NewOperation{newOp("site-a", devs[0], "INSPECT")}); err != nil {
		t.Fatal(err)
	}
	// The second request names a free device and the busy one: nothing of it is stored.
	_, _, err := s.CreateOperations(ctx, []store.NewOperation{newOp("site-a", devs[1], "INSPECT"), newOp("site-a", devs[0], "CLEAN")})
	if !errors.Is(err, store.ErrOperationActive) {
		t.Fatalf("second operation on a busy device: %v, want ErrOperationActive", err)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM operations`); n != 1 {
		t.Fatalf("%d operations stored, want 1 (the refused request stores nothing)", n)
	}
	// Two enrolments of one node name at a site cannot both be active.
	enrol := func() store.NewOperation {
		o := newOp("site-a", "", store.KindEnrol)
		o.DeviceName = "rack1-n1"
		o.Node = json.RawMessage(`{"name":"rack1-n1","driver":"ipmi","driverInfo":{"ipmi_address":"***"}}`)
		return o
	}
	if _, _, err := s.CreateOperations(ctx, []store.NewOperation{enrol()}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateOperations(ctx, []store.NewOperation{enrol()}); !errors.Is(err, store.ErrOperationActive) {
		t.Fatalf("second enrolment of one name: %v, want ErrOperationActive", err)
	}
}

func TestOperationsListNewestFirstWithKeysetPaging(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	_, devs := opSite(t, s, "site-a", 5)
	_, other := opSite(t, s, "site-b", 1)
	var want []string
	for _, d := range devs {
		_, ops, err := s.CreateOperations(ctx, []store.NewOperation{newOp("site-a", d, "INSPECT")})
		if err != nil {
			t.Fatal(err)
		}
		want = append([]string{ops[0].ID}, want...)
	}
	if _, _, err := s.CreateOperations(ctx, []store.NewOperation{newOp("site-b", other[0], "CLEAN")}); err != nil {
		t.Fatal(err)
	}
	var got []string
	f := store.OperationFilter{Sites: []string{"site-a"}, Limit: 2}
	for page := 0; page < 5; page++ {
		ops, err := s.ListOperations(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range ops {
			got = append(got, o.ID)
		}
		if len(ops) < 2 {
			break
		}
		f.AfterTime, f.AfterID = ops[len(ops)-1].CreatedAt, ops[len(ops)-1].ID
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged site-a operations\n got %v\nwant %v (newest first, each once)", got, want)
	}
	ops, err := s.ListOperations(ctx, store.OperationFilter{Kinds: []store.OperationKind{"CLEAN"}, Limit: 10})
	if err != nil || len(ops) != 1 || ops[0].Site != "site-b" {
		t.Fatalf("kind filter: %v %v", ops, err)
	}
	ops, err = s.ListOperations(ctx, store.OperationFilter{Sites: []string{}, Limit: 10})
	if err != nil || len(ops) != 0 {
		t.Fatalf("no allowed sites: %d operations, %v; want none", len(ops), err)
	}
}

func TestOperationsConcurrencyLimitQueuesTheRest(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	sess, devs := opSite(t, s, "site-a", 4)
	var ops []store.NewOperation
	for _, d := range devs {
		ops = append(ops, newOp("site-a", d, "PROVIDE"))
	}
	if _, _, err := s.CreateOperations(ctx, ops); err != nil {
		t.Fatal(err)
	}
	deliver := func() []string {
		running, pending, free, err := s.DueOperations(ctx, "site-a", sess.Epoch, delivery, false, 100)
		if err != nil {
			t.Fatal(err)
		}
		var sent []string
		for _, o := range running {
			sent = append(sent, o.ID)
		}
		for _, o := range pending[:min(free, len(pending))] {
			got, ok, err := s.MarkOperationSent(ctx, "site-a", sess.Epoch, o.ID)
			if err != nil || !ok || got.State != store.OperationRunning || got.Attempts != 1 {
				t.Fatalf("mark sent: %+v %v %v", got, ok, err)
			}
			sent = append(sent, o.ID)
		}
		return sent
	}
	if first := deliver(); len(first) != 2 {
		t.Fatalf("first delivery sent %d, want the limit 2", len(first))
	}
	if again := deliver(); len(again) != 0 {
		t.Fatalf("at the limit, a sweep sent %v; want nothing", again)
	}
	pending, _ := s.ListOperations(ctx, store.OperationFilter{States: []store.OperationState{store.OperationPending}, Limit: 10})
	if len(pending) != 2 {
		t.Fatalf("%d PENDING, want 2 visibly queued", len(pending))
	}
	// One finishes: one slot frees.
	running, _ := s.ListOperations(ctx, store.OperationFilter{States: []store.OperationState{store.OperationRunning}, Limit: 10})
	if _, err := s.RecordOperationProgress(ctx, "site-a", store.OperationProgress{OperationID: running[0].ID, Attempt: 1, State: store.OperationSucceeded}); err != nil {
		t.Fatal(err)
	}
	if next := deliver(); len(next) != 1 {
		t.Fatalf("after one finished, %d sent; want 1", len(next))
	}
	// A newer link fences the old one: nothing is due for it.
	open(t, s, "site-a")
	if r, p, _, err := s.DueOperations(ctx, "site-a", sess.Epoch, store.OperationDelivery{PerSiteLimit: 10}, true, 100); err != nil || len(r)+len(p) != 0 {
		t.Fatalf("fenced link got %d+%d due operations, %v", len(r), len(p), err)
	}
}

func TestOperationProgressAttemptsAndFinalStates(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	sess, devs := opSite(t, s, "site-a", 1)
	_, ops, err := s.CreateOperations(ctx, []store.NewOperation{newOp("site-a", devs[0], "CLEAN")})
	if err != nil {
		t.Fatal(err)
	}
	id := ops[0].ID
	for i := 0; i < 2; i++ {
		if _, ok, err := s.MarkOperationSent(ctx, "site-a", sess.Epoch, id); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	res, err := s.RecordOperationProgress(ctx, "site-a", store.OperationProgress{OperationID: id, Attempt: 1, State: store.OperationFailed, Error: "old"})
	if err != nil || !res.Ignored {
		t.Fatalf("progress for attempt 1 after attempt 2 was sent: %+v %v; want ignored", res, err)
	}
	res, err = s.RecordOperationProgress(ctx, "site-a", store.OperationProgress{OperationID: id, Attempt: 2, State: store.OperationRunning,
		ProvisionState: "clean wait", Steps: json.RawMessage(`[{"name":"clean"}]`)})
	if err != nil || res.Ignored || res.Operation.ProvisionState != "clean wait" {
		t.Fatalf("running progress: %+v %v", res, err)
	}
	if _, err := s.RecordOperationProgress(ctx, "site-b", store.OperationProgress{OperationID: id, Attempt: 2, State: store.OperationRunning}); !errors.Is(err, store.ErrWrongSite) {
		t.Fatalf("progress from another site: %v, want ErrWrongSite", err)
	}
	res, err = s.RecordOperationProgress(ctx, "site-a", store.OperationProgress{OperationID: id, Attempt: 2, State: store.OperationFailed,
		Error: "Clean step unknown", FailureReason: "CleanFailed"})
	if err != nil || res.Operation.State != store.OperationFailed || res.Operation.EndedAt == nil {
		t.Fatalf("failed progress: %+v %v", res, err)
	}
	res, err = s.RecordOperationProgress(ctx, "site-a", store.OperationProgress{OperationID: id, Attempt: 2, State: store.OperationRunning})
	if err != nil || !res.Ignored {
		t.Fatalf("running after FAILED: %+v %v; want ignored (final states never go back)", res, err)
	}
	if _, ok, _ := s.MarkOperationSent(ctx, "site-a", sess.Epoch, id); ok {
		t.Fatal("a FAILED operation was marked sent again")
	}
	o, _ := s.GetOperation(ctx, id)
	if o.State != store.OperationFailed || o.LastError != "Clean step unknown" || string(o.Steps) != `[{"name": "clean"}]` {
		t.Fatalf("stored %+v", o)
	}
}

func TestOperationCancelRules(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	sess, devs := opSite(t, s, "site-a", 2)
	_, ops, err := s.CreateOperations(ctx, []store.NewOperation{newOp("site-a", devs[0], "CLEAN"), newOp("site-a", devs[1], "CLEAN")})
	if err != nil {
		t.Fatal(err)
	}
	abortable := func(ps string) bool { return ps == "clean wait" }
	o, err := s.CancelOperation(ctx, ops[0].ID, "op", "wrong node", abortable)
	if err != nil || o.State != store.OperationCancelled {
		t.Fatalf("cancel PENDING: %+v %v", o, err)
	}
	if _, err := s.CancelOperation(ctx, ops[0].ID, "op", "again", abortable); !errors.Is(err, store.ErrOperationFinished) {
		t.Fatalf("cancel CANCELLED: %v", err)
	}
	id := ops[1].ID
	if _, ok, err := s.MarkOperationSent(ctx, "site-a", sess.Epoch, id); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := s.RecordOperationProgress(ctx, "site-a", store.OperationProgress{OperationID: id, Attempt: 1, State: store.OperationRunning, ProvisionState: "cleaning"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CancelOperation(ctx, id, "op", "stop", abortable); !errors.Is(err, store.ErrNotCancellable) {
		t.Fatalf("cancel while cleaning: %v, want ErrNotCancellable", err)
	}
	if _, err := s.RecordOperationProgress(ctx, "site-a", store.OperationProgress{OperationID: id, Attempt: 1, State: store.OperationRunning, ProvisionState: "clean wait"}); err != nil {
		t.Fatal(err)
	}
	o, err = s.CancelOperation(ctx, id, "op", "stop", abortable)
	if err != nil || o.State != store.OperationRunning || !o.CancelRequested || o.SentAt != nil {
		t.Fatalf("cancel in clean wait: %+v %v; want RUNNING, cancel_requested, due now", o, err)
	}
	running, _, _, err := s.DueOperations(ctx, "site-a", sess.Epoch, delivery, false, 10)
	if err != nil || len(running) != 1 || running[0].ID != id {
		t.Fatalf("the cancel is not due: %v %v", running, err)
	}
}

// TestEnrolSecretsNeverInTheTable stores an ENROL the way the service does
// and reads every operations row as text: no driver_info value is there.
func TestEnrolSecretsNeverInTheTable(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	opSite(t, s, "site-a", 0)
	o := newOp("site-a", "", store.KindEnrol)
	o.DeviceName = "n1"
	o.Node = json.RawMessage(`{"name":"n1","driver":"ipmi","driverInfo":{"ipmi_address":"***","ipmi_password":"***"}}`)
	if _, _, err := s.CreateOperations(ctx, []store.NewOperation{o}); err != nil {
		t.Fatal(err)
	}
	row := pgtest.QueryString(t, url, `SELECT string_agg(o::text, '|') FROM operations o`)
	if !strings.Contains(row, "ipmi_password") || strings.Contains(row, "s3cret") {
		t.Fatalf("row %s", row)
	}
}

// Issue 21: a restarted satellite reports only its own steps (a later
// attempt); the hub keeps the steps of the earlier attempt, with the
// requests they sent, and replaces the rest.
func TestOperationStepsOfEarlierAttemptsSurvive(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	sess, devs := opSite(t, s, "site-a", 1)
	_, ops, err := s.CreateOperations(ctx, []store.NewOperation{newOp("site-a", devs[0], "CLEAN")})
	if err != nil {
		t.Fatal(err)
	}
	id := ops[0].ID
	send := func() {
		t.Helper()
		if _, ok, err := s.MarkOperationSent(ctx, "site-a", sess.Epoch, id); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	progress := func(attempt int32, steps string) store.Operation {
		t.Helper()
		res, err := s.RecordOperationProgress(ctx, "site-a", store.OperationProgress{OperationID: id, Attempt: attempt,
			State: store.OperationRunning, Steps: json.RawMessage(steps)})
		if err != nil || res.Ignored {
			t.Fatalf("progress of attempt %d: %+v %v", attempt, res, err)
		}
		return res.Operation
	}
	put := `{"method":"PUT","path":"baremetal /v1/nodes/x/states/provision","detail":"target=clean","status":202,"attempt":1}`
	send()
	progress(1, `[{"name":"mark","attempt":1},{"name":"clean","attempt":1,"requests":[`+put+`]}]`)
	progress(1, `[{"name":"mark","attempt":1},{"name":"clean","attempt":1,"requests":[`+put+`]},{"name":"wait-manageable","observedState":"clean wait","attempt":1}]`)
	// The satellite is killed; the hub redelivers as attempt 2 to its
	// successor, which reports only what it saw.
	send()
	o := progress(2, `[{"name":"wait-manageable","observedState":"clean wait","attempt":2}]`)
	var steps []struct {
		Name     string            `json:"name"`
		Attempt  int32             `json:"attempt"`
		Requests []json.RawMessage `json:"requests"`
	}
	if err := json.Unmarshal(o.Steps, &steps); err != nil {
		t.Fatal(err)
	}
	if len(steps) != 4 || steps[1].Name != "clean" || steps[1].Attempt != 1 || len(steps[1].Requests) != 1 || steps[3].Attempt != 2 {
		t.Fatalf("stored steps %s: want attempt 1's three steps (with the PUT) then attempt 2's one", o.Steps)
	}
	// Attempt 2 goes on: its own steps are replaced, attempt 1's stay.
	o = progress(2, `[{"name":"wait-manageable","observedState":"manageable","attempt":2}]`)
	if n := strings.Count(string(o.Steps), `"attempt": 1`); n != 4 || !strings.Contains(string(o.Steps), `"observedState": "manageable"`) {
		t.Fatalf("stored steps %s", o.Steps)
	}
	// A satellite that records no attempts replaces the list, as before.
	o = progress(2, `[{"name":"clean"}]`)
	if string(o.Steps) != `[{"name": "clean"}]` {
		t.Fatalf("stored steps %s", o.Steps)
	}
}

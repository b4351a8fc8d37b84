package link_test

import (
	"context"
	"crypto/rand"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/link"
	"github.com/ironlink/ironlink/hub/operations/vault"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/grpctest"
)

// opsHub starts a hub whose links sweep every 100 ms and resend an
// operation without progress after resend, with a device of site-a
// (manageable) registered; it returns the hub, the operator API and the
// device id.
func opsHub(t *testing.T, resend time.Duration) (*grpctest.Hub, ironlinkv1.OperationServiceClient, string) {
	t.Helper()
	h, api, dev, _ := opsHubWith(t, resend, nil)
	return h, api, dev
}

// opsHubWith is opsHub with the credential vault v (nil: the link
// server's default, memory mode); it also returns the database URL.
func opsHubWith(t *testing.T, resend time.Duration, v *vault.Vault) (*grpctest.Hub, ironlinkv1.OperationServiceClient, string, string) {
	t.Helper()
	ctx := context.Background()
	st, url := storetest.New(t, nil)
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "site-a", BootID: "b0", Replica: "seed", Capabilities: []string{"operations"}})
	if err != nil {
		t.Fatal(err)
	}
	dev := uuid.NewString()
	now := time.Now().UTC()
	if _, err := st.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{{DeviceID: dev, ObservedTime: now,
		Facts:      &store.Facts{Name: "node-1", ProvisionState: "manageable"},
		Conditions: []condition.Condition{{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}}}}}); err != nil {
		t.Fatal(err)
	}
	h := grpctest.Start(t, st, grpctest.Options{Link: link.Config{CommandSweep: 100 * time.Millisecond, HeartbeatInterval: time.Hour,
		Operations: store.OperationDelivery{PerSiteLimit: 5, ResendAfter: resend, MaxResendAfter: resend}, Vault: v}})
	return h, ironlinkv1.NewOperationServiceClient(h.Operator(t, "ops-admin")), dev, url
}

// sealedOpsHub is opsHub in sealed mode (the hub's --enrol-key-file) with
// a fresh random key; it returns the hub, the operator API, the database
// URL and the sealer.
func sealedOpsHub(t *testing.T) (*grpctest.Hub, ironlinkv1.OperationServiceClient, string, *vault.Sealer) {
	t.Helper()
	key := make([]byte, vault.KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	sl, err := vault.NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	h, api, _, url := opsHubWith(t, time.Hour, vault.New("r1", 0).WithSealer(sl))
	return h, api, url, sl
}

// satellite opens a scripted link of site-a announcing caps.
func satellite(t *testing.T, h *grpctest.Hub, caps ...string) *satsim.Script {
	t.Helper()
	s, err := satsim.OpenScript(context.Background(), h.Satellite(t, "site-a"), satsim.HelloMsg(&ironlinkv1.Hello{Site: "site-a", BootId: uuid.NewString(), Capabilities: caps}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := s.Welcome(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	return s
}

// nextOperation returns the next OperationRequest the hub sends (other
// messages skipped), or nil when none comes within timeout.
func nextOperation(t *testing.T, s *satsim.Script, timeout time.Duration) *ironlinkv1.OperationRequest {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		m, err := s.Next(left)
		if err != nil {
			return nil
		}
		if op := m.GetOperation(); op != nil {
			return op
		}
	}
}

func progress(p *ironlinkv1.OperationProgress) *ironlinkv1.ConnectRequest {
	return &ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_OperationProgress{OperationProgress: p}}
}

// waitState polls GetOperation until op is in state want (fails after 5 s).
func waitState(t *testing.T, api ironlinkv1.OperationServiceClient, id string, want ironlinkv1.OperationState) *ironlinkv1.Operation {
	t.Helper()
	var o *ironlinkv1.Operation
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		r, err := api.GetOperation(context.Background(), &ironlinkv1.GetOperationRequest{OperationId: id})
		if err != nil {
			t.Fatal(err)
		}
		if o = r.GetOperation(); o.GetState() == want {
			return o
		}
	}
	t.Fatalf("operation %s is %v, want %v", id, o.GetState(), want)
	return nil
}

func TestOperationDeliveryResendAndFinalStates(t *testing.T) {
	// The resend wait is 2 s, not less: the progress the test sends must be
	// recorded (a PostgreSQL commit) before the wait runs out, else the hub
	// rightly resends early (the first check below) or sends attempt 3 before
	// SUCCEEDED of attempt 2 is in (Attempts 3). At 700 ms that raced the
	// commit on a loaded CI machine with fsync on.
	h, api, dev := opsHub(t, 2*time.Second)
	ctx := context.Background()
	sat := satellite(t, h, "operations")
	resp, err := api.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, Devices: []string{"node-1"}, Reason: "new rack"})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Operations[0].GetOperationId()
	req := nextOperation(t, sat, 3*time.Second)
	if req == nil || req.GetOperationId() != id || req.GetAttempt() != 1 || req.GetRedelivery() || req.GetDeviceId() != dev ||
		req.GetKind() != ironlinkv1.OperationKind_OPERATION_KIND_INSPECT {
		t.Fatalf("first delivery %v, want attempt 1 of %s", req, id)
	}
	waitState(t, api, id, ironlinkv1.OperationState_OPERATION_STATE_RUNNING)
	if err := sat.Send(progress(&ironlinkv1.OperationProgress{OperationId: id, Attempt: 1, State: ironlinkv1.OperationState_OPERATION_STATE_RUNNING,
		ProvisionState: "inspect wait", Steps: []*ironlinkv1.OperationStep{{Name: "inspect", ObservedState: "inspect wait"}}})); err != nil {
		t.Fatal(err)
	}
	// No progress for the resend wait: attempt 2, a redelivery; not sooner.
	start := time.Now()
	req = nextOperation(t, sat, 10*time.Second)
	if req == nil || req.GetAttempt() != 2 || !req.GetRedelivery() {
		t.Fatalf("resend %v, want attempt 2 with redelivery", req)
	}
	if waited := time.Since(start); waited < 1500*time.Millisecond {
		t.Fatalf("resent after %s: sooner than the resend wait (2s after the last progress)", waited)
	}
	// Progress for attempt 1 is now stale: ignored.
	if err := sat.Send(progress(&ironlinkv1.OperationProgress{OperationId: id, Attempt: 1, State: ironlinkv1.OperationState_OPERATION_STATE_FAILED, Error: "stale"})); err != nil {
		t.Fatal(err)
	}
	if err := sat.Send(progress(&ironlinkv1.OperationProgress{OperationId: id, Attempt: 2, State: ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED,
		ProvisionState: "manageable", Steps: []*ironlinkv1.OperationStep{{Name: "inspect"}, {Name: "wait-manageable", ObservedState: "manageable"}}})); err != nil {
		t.Fatal(err)
	}
	o := waitState(t, api, id, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	if o.GetLastError() != "" || len(o.GetSteps()) != 2 || o.GetProvisionState() != "manageable" || o.GetAttempts() != 2 || o.GetEndTime() == nil {
		t.Fatalf("after success %v (the stale FAILED must not count)", o)
	}
	// A final state sticks: later RUNNING progress is ignored, nothing is resent.
	if err := sat.Send(progress(&ironlinkv1.OperationProgress{OperationId: id, Attempt: 2, State: ironlinkv1.OperationState_OPERATION_STATE_RUNNING})); err != nil {
		t.Fatal(err)
	}
	// Watched for longer than the resend wait, so that a resend would show.
	if again := nextOperation(t, sat, 2500*time.Millisecond); again != nil {
		t.Fatalf("a finished operation was sent again: %v", again)
	}
	if o := waitState(t, api, id, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED); o.GetAttempts() != 2 {
		t.Fatalf("attempts %d after the end, want 2", o.GetAttempts())
	}
}

func TestOperationReconnectRedeliversWithCredentials(t *testing.T) {
	h, api, _ := opsHub(t, time.Hour)
	ctx := context.Background()
	resp, err := api.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL, Site: "site-a", Reason: "rack 2",
		Nodes: []*ironlinkv1.NodeSpec{{Name: "r2-n1", Driver: "ipmi", DriverInfo: map[string]string{"ipmi_address": "10.1.0.9", "ipmi_password": "hunter2"}}}})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Operations[0].GetOperationId()
	// A link without the capability gets no operation.
	old := satellite(t, h)
	if req := nextOperation(t, old, 700*time.Millisecond); req != nil {
		t.Fatalf("a link without the operations capability got %v", req)
	}
	old.Close()
	sat := satellite(t, h, "operations")
	req := nextOperation(t, sat, 3*time.Second)
	if req == nil || req.GetOperationId() != id || req.GetAttempt() != 1 || req.GetNode().GetDriverInfo()["ipmi_password"] != "hunter2" {
		t.Fatalf("enrol delivery %v, want attempt 1 with the real driver_info", req)
	}
	sat.Close()
	// The satellite reconnects: the RUNNING operation goes out again at once
	// (the resend wait is an hour), as a new attempt, credentials included.
	sat = satellite(t, h, "operations")
	req = nextOperation(t, sat, 3*time.Second)
	if req == nil || req.GetAttempt() != 2 || !req.GetRedelivery() || req.GetNode().GetDriverInfo()["ipmi_address"] != "10.1.0.9" {
		t.Fatalf("redelivery after reconnect %v, want attempt 2 with driver_info", req)
	}
	node := uuid.NewString()
	if err := sat.Send(progress(&ironlinkv1.OperationProgress{OperationId: id, Attempt: 2, State: ironlinkv1.OperationState_OPERATION_STATE_RUNNING,
		DeviceId: node, ProvisionState: "verifying"})); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		r, _ := api.GetOperation(ctx, &ironlinkv1.GetOperationRequest{OperationId: id})
		if r.GetOperation().GetDeviceId() == node {
			break
		}
	}
	// Watch: the operation now, then its end.
	w, err := api.WatchOperation(ctx, &ironlinkv1.WatchOperationRequest{OperationId: id})
	if err != nil {
		t.Fatal(err)
	}
	first, err := w.Recv()
	if err != nil || first.GetOperation().GetDeviceId() != node || first.GetOperation().GetState() != ironlinkv1.OperationState_OPERATION_STATE_RUNNING {
		t.Fatalf("watch first %v %v", first, err)
	}
	if err := sat.Send(progress(&ironlinkv1.OperationProgress{OperationId: id, Attempt: 2, State: ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED, DeviceId: node, ProvisionState: "manageable"})); err != nil {
		t.Fatal(err)
	}
	var last *ironlinkv1.WatchOperationResponse
	for {
		m, err := w.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		last = m
	}
	if last.GetOperation().GetState() != ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED {
		t.Fatalf("watch ended with %v, want SUCCEEDED last", last)
	}
	// Stored redacted, with the node's UUID.
	r, _ := api.GetOperation(ctx, &ironlinkv1.GetOperationRequest{OperationId: id})
	if r.GetOperation().GetNode().GetDriverInfo()["ipmi_password"] != "***" || r.GetOperation().GetDeviceId() != node {
		t.Fatalf("stored %v", r.GetOperation())
	}
}

func TestOperationProgressFromAnotherSiteEndsTheLink(t *testing.T) {
	h, api, _ := opsHub(t, time.Hour)
	ctx := context.Background()
	resp, err := api.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, Devices: []string{"node-1"}, Reason: "x"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := satsim.OpenScript(ctx, h.Satellite(t, "site-b"), satsim.HelloMsg(&ironlinkv1.Hello{Site: "site-b", BootId: "b", Capabilities: []string{"operations"}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Welcome(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	_ = s.Send(progress(&ironlinkv1.OperationProgress{OperationId: resp.Operations[0].GetOperationId(), Attempt: 0, State: ironlinkv1.OperationState_OPERATION_STATE_FAILED}))
	_, st, err := s.Wait(5 * time.Second)
	if err != nil || st.Code().String() != "InvalidArgument" {
		t.Fatalf("attempt 0: %v %v, want InvalidArgument", st, err)
	}
	s, err = satsim.OpenScript(ctx, h.Satellite(t, "site-b"), satsim.HelloMsg(&ironlinkv1.Hello{Site: "site-b", BootId: "b", Capabilities: []string{"operations"}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Welcome(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	_ = s.Send(progress(&ironlinkv1.OperationProgress{OperationId: resp.Operations[0].GetOperationId(), Attempt: 1, State: ironlinkv1.OperationState_OPERATION_STATE_FAILED}))
	_, st, err = s.Wait(5 * time.Second)
	if err != nil || st.Code().String() != "PermissionDenied" {
		t.Fatalf("progress for site-a's operation from site-b: %v %v, want PermissionDenied", st, err)
	}
	if r, _ := api.GetOperation(ctx, &ironlinkv1.GetOperationRequest{OperationId: resp.Operations[0].GetOperationId()}); r.GetOperation().GetState() != ironlinkv1.OperationState_OPERATION_STATE_PENDING {
		t.Fatalf("state %v, want PENDING (nothing written)", r.GetOperation().GetState())
	}
}

// TestEnrolWhoseCredentialsAreGoneFails stores ENROLs as other processes
// would have: one held by a live replica elsewhere waits PENDING for it;
// one held by a previous process of this replica (its credentials died
// with it) ends FAILED with CredentialsUnavailable, never sent without BMC
// credentials.
func TestEnrolWhoseCredentialsAreGoneFails(t *testing.T) {
	h, api, _ := opsHub(t, time.Hour)
	ctx := context.Background()
	enrol := func(name, holder string) string {
		_, ops, err := h.Store.CreateOperations(ctx, []store.NewOperation{{ID: uuid.NewString(), Site: "site-a", DeviceName: name, Kind: store.KindEnrol,
			Node: []byte(`{"name":"` + name + `","driver":"ipmi","driverInfo":{"ipmi_address":"***"}}`), Actor: "op", Reason: "x", SecretHolder: holder}})
		if err != nil {
			t.Fatal(err)
		}
		return ops[0].ID
	}
	elsewhere := enrol("r3-n1", "r2/"+uuid.NewString())
	lost := enrol("r3-n2", "r1/"+uuid.NewString())
	sat := satellite(t, h, "operations")
	if req := nextOperation(t, sat, time.Second); req != nil {
		t.Fatalf("an enrolment without its credentials was sent: %v", req)
	}
	o := waitState(t, api, lost, ironlinkv1.OperationState_OPERATION_STATE_FAILED)
	if o.GetAttempts() != 0 || o.GetLastError() == "" {
		t.Fatalf("lost credentials: %v", o)
	}
	if o := waitState(t, api, elsewhere, ironlinkv1.OperationState_OPERATION_STATE_PENDING); o.GetAttempts() != 0 {
		t.Fatalf("held elsewhere: %v", o)
	}
}

// TestSealedEnrolIsDeliveredByAnyReplica runs the sealed mode (the hub's
// --enrol-key-file): the BMC credentials are stored only sealed, an
// enrolment another replica took is delivered by the one holding the link
// with them, the sealed value is gone once the node exists, and an
// enrolment sealed with another key ends FAILED CredentialsUnavailable
// naming the keys, never sent without its credentials.
func TestSealedEnrolIsDeliveredByAnyReplica(t *testing.T) {
	h, api, url, sl := sealedOpsHub(t)
	ctx := context.Background()

	// Through this replica's API: stored sealed, nothing in clear.
	resp, err := api.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL, Site: "site-a", Reason: "rack 4",
		Nodes: []*ironlinkv1.NodeSpec{{Name: "r4-n1", Driver: "ipmi", DriverInfo: map[string]string{"ipmi_address": "10.4.0.1", "ipmi_password": "hunter4"}}}})
	if err != nil {
		t.Fatal(err)
	}
	here := resp.Operations[0].GetOperationId()
	if n := pgtest.Count(t, url, `SELECT count(*) FROM operations WHERE sealed_driver_info IS NOT NULL AND secret_holder = '`+sl.Holder()+`'`); n != 1 {
		t.Fatalf("%d sealed operations after StartOperation, want 1", n)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM operations WHERE position('hunter4'::bytea in coalesce(sealed_driver_info, ''::bytea)) > 0 OR node::text LIKE '%hunter4%'`); n != 0 {
		t.Fatal("the BMC password is stored in clear")
	}
	// As another replica would have stored it (its own process, same key).
	other := uuid.NewString()
	sealed, err := sl.Seal(other, map[string]string{"ipmi_address": "10.4.0.2", "ipmi_password": "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	wrongKey, _ := vault.NewSealer(make([]byte, vault.KeySize))
	foreign := uuid.NewString()
	foreignSealed, _ := wrongKey.Seal(foreign, map[string]string{"ipmi_password": "x"})
	for _, o := range []store.NewOperation{
		{ID: other, Site: "site-a", DeviceName: "r4-n2", Kind: store.KindEnrol, Actor: "op", Reason: "x",
			Node: []byte(`{"name":"r4-n2","driver":"ipmi","driverInfo":{"ipmi_address":"***","ipmi_password":"***"}}`), SecretHolder: sl.Holder(), SealedDriverInfo: sealed},
		{ID: foreign, Site: "site-a", DeviceName: "r4-n3", Kind: store.KindEnrol, Actor: "op", Reason: "x",
			Node: []byte(`{"name":"r4-n3","driver":"ipmi","driverInfo":{"ipmi_password":"***"}}`), SecretHolder: wrongKey.Holder(), SealedDriverInfo: foreignSealed},
	} {
		if _, _, err := h.Store.CreateOperations(ctx, []store.NewOperation{o}); err != nil {
			t.Fatal(err)
		}
	}

	sat := satellite(t, h, "operations")
	got := map[string]*ironlinkv1.OperationRequest{}
	for len(got) < 2 {
		req := nextOperation(t, sat, 5*time.Second)
		if req == nil {
			t.Fatalf("delivered %d enrolments, want 2 (%v)", len(got), got)
		}
		got[req.GetOperationId()] = req
	}
	if r := got[here]; r == nil || r.GetNode().GetDriverInfo()["ipmi_password"] != "hunter4" {
		t.Fatalf("enrolment taken here delivered as %v, want the real driver_info", r)
	}
	if r := got[other]; r == nil || r.GetNode().GetDriverInfo()["ipmi_password"] != "elsewhere" || r.GetNode().GetDriverInfo()["ipmi_address"] != "10.4.0.2" {
		t.Fatalf("enrolment another replica took delivered as %v, want the real driver_info", r)
	}
	o := waitState(t, api, foreign, ironlinkv1.OperationState_OPERATION_STATE_FAILED)
	if o.GetAttempts() != 0 ||
		!strings.Contains(o.GetLastError(), wrongKey.KeyID()) || !strings.Contains(o.GetLastError(), sl.KeyID()) {
		t.Fatalf("enrolment sealed with another key: %v", o)
	}

	// The node exists: the sealed value is dropped at once.
	if err := sat.Send(progress(&ironlinkv1.OperationProgress{OperationId: other, Attempt: 1, State: ironlinkv1.OperationState_OPERATION_STATE_RUNNING,
		DeviceId: uuid.NewString(), ProvisionState: "enroll"})); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n := pgtest.Count(t, url, `SELECT count(*) FROM operations WHERE sealed_driver_info IS NOT NULL`)
		if n == 1 { // only the enrolment taken here, not yet reported
			break
		}
		if time.Now().After(end) {
			t.Fatalf("%d sealed values after the node exists and one failed, want 1", n)
		}
	}
	// The other ends without a node (the BMC refused): dropped too.
	if err := sat.Send(progress(&ironlinkv1.OperationProgress{OperationId: here, Attempt: 1, State: ironlinkv1.OperationState_OPERATION_STATE_FAILED,
		Error: "BMC 10.4.0.1 refused the credentials"})); err != nil {
		t.Fatal(err)
	}
	waitState(t, api, here, ironlinkv1.OperationState_OPERATION_STATE_FAILED)
	if n := pgtest.Count(t, url, `SELECT count(*) FROM operations WHERE sealed_driver_info IS NOT NULL`); n != 0 {
		t.Fatalf("%d sealed values once every enrolment ended or has its node, want 0", n)
	}
}

package remediation_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/remediation"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// handOff makes dev's fault recommend CONTACT_SUPPORT and runs a pass: it
// is handed off at once.
func (r *rig) handOff(dev string) {
	r.t.Helper()
	at := r.clk.Now()
	conds := append(storetest.Healthy(at), condition.Condition{Type: condition.HealthType("GPU", "GpuXidError"), Status: condition.False,
		Reason: "XID79", Message: "GPU fell off the bus", LastTransitionTime: at, ObservedTime: at,
		Health: &condition.Health{Agent: "gpu-health", ComponentClass: "GPU", CheckName: "GpuXidError", Fatal: true,
			RecommendedAction: policy.RecommendedActions["CONTACT_SUPPORT"], ErrorCodes: []string{"79"}}})
	r.site.Send([]store.DeviceUpdate{{DeviceID: dev, Conditions: conds, ObservedTime: at}})
	if s := r.tick(); s.HandedOff != 1 {
		r.t.Fatalf("not handed off: %+v", s)
	}
}

// hangingReceiver hangs on every request for the device hang until
// release is closed; for any other device it answers 500 to the first
// request and 204 after.
type hangingReceiver struct {
	hang    string
	release chan struct{}
	hanging chan struct{} // closed when the hanging request arrived
	once    sync.Once
	mu      sync.Mutex
	others  int
}

func (h *hangingReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var p remediation.HandoffPayload
	_ = json.Unmarshal(body, &p)
	if p.DeviceID == h.hang {
		h.once.Do(func() { close(h.hanging) })
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	h.mu.Lock()
	h.others++
	n := h.others
	h.mu.Unlock()
	if n == 1 {
		http.Error(w, "down for a moment", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Webhook deliveries are independent: while the receiver hangs on one
// handoff, another handoff made after it is delivered (its 500 retried),
// and every attempt is recorded and shown by the API (time, HTTP status or
// error, duration): the 500 then the 204 as two attempts, in order.
func TestWebhookDeliveriesAreIndependent(t *testing.T) {
	r := newRig(t, ladderPolicy, 4, true)
	slow, fast := r.site.IDs[0], r.site.IDs[1]
	rc := &hangingReceiver{hang: slow, release: make(chan struct{}), hanging: make(chan struct{})}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	defer close(rc.release)
	w := remediation.NewWebhookSender(r.st, remediation.WebhookConfig{URL: srv.URL, Secret: []byte("s3cret"), Timeout: time.Minute,
		Interval: 20 * time.Millisecond, InitialInterval: 20 * time.Millisecond, MaxInterval: 50 * time.Millisecond}, testlog.New(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()

	r.handOff(slow)
	select {
	case <-rc.hanging:
	case <-time.After(20 * time.Second):
		t.Fatal("the first handoff's webhook never arrived")
	}
	r.handOff(fast)
	deadline := time.Now().Add(20 * time.Second)
	for r.count(`SELECT count(*) FROM remediation_handoffs WHERE device_id = $1 AND webhook_state = 'DELIVERED'`, fast) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the second handoff was not delivered while the receiver hung on the first")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := r.count(`SELECT count(*) FROM remediation_handoffs WHERE device_id = $1 AND webhook_state = 'PENDING' AND webhook_attempts = 0`, slow); n != 1 {
		t.Fatal("the hanging delivery is not still in flight")
	}
	f, err := policy.Parse([]byte(ladderPolicy))
	if err != nil {
		t.Fatal(err)
	}
	api := remediation.NewAPI(r.st, func() *policy.File { return f }, func(context.Context) string { return "alice" }, testlog.New(t))
	got, err := api.ListHandoffs(context.Background(), &ironlinkv1.ListHandoffsRequest{Device: fast})
	if err != nil || len(got.GetHandoffs()) != 1 {
		t.Fatalf("list: %v %v", got, err)
	}
	log := got.GetHandoffs()[0].GetWebhookAttemptLog()
	if len(log) != 2 || log[0].GetAttempt() != 1 || log[0].GetStatusCode() != 500 || log[0].GetError() != "500 Internal Server Error" ||
		log[1].GetAttempt() != 2 || log[1].GetStatusCode() != 204 || log[1].GetError() != "" ||
		log[0].GetAttemptTime().AsTime().After(log[1].GetAttemptTime().AsTime()) || log[0].GetDuration() == nil {
		t.Fatalf("attempts of the second handoff: %v", log)
	}
	// The receiver answers the first at last: delivered, one attempt.
	rc.release <- struct{}{}
	for r.count(`SELECT count(*) FROM remediation_handoffs WHERE device_id = $1 AND webhook_state = 'DELIVERED' AND webhook_attempts = 1`, slow) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first handoff was not delivered once answered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	expl, err := api.GetDeviceRemediation(context.Background(), &ironlinkv1.GetDeviceRemediationRequest{Device: slow})
	if err != nil || len(expl.GetHandoffs()) != 1 || len(expl.GetHandoffs()[0].GetWebhookAttemptLog()) != 1 ||
		expl.GetHandoffs()[0].GetWebhookAttemptLog()[0].GetStatusCode() != 200 || expl.GetDeviceName() != "site-a-000" {
		t.Fatalf("explain of the first: %v %v", expl, err)
	}
}

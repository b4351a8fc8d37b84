package remediation_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/remediation"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// receiver is the handoff webhook's test receiver: it verifies every
// request's signature and answers 500 to the first one, 200 after.
type receiver struct {
	mu       sync.Mutex
	secret   []byte
	bodies   [][]byte
	verified []bool
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.bodies = append(rc.bodies, body)
	rc.verified = append(rc.verified, remediation.Verify(rc.secret, body, r.Header.Get(remediation.SignatureHeader)) &&
		r.Header.Get(remediation.EventHeader) == remediation.HandoffEventType)
	if len(rc.bodies) == 1 {
		http.Error(w, "down for a moment", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) received() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.bodies)
}

// fixOnce runs one ladder on dev whose first step fixes it: fault,
// quarantine, reboot, healthy, settled, released.
func (r *rig) fixOnce(dev string) {
	r.t.Helper()
	r.site.Fault([]string{dev}, "DeployFailed", r.clk.Now())
	r.tick()
	r.finishOps(dev, "SUCCEEDED")
	r.site.Heal(dev)
	r.tick()
	r.clk.Add(121 * time.Second)
	if s := r.tick(); s.Fixed != 1 {
		r.t.Fatalf("not fixed: %+v", s)
	}
	r.clk.Add(time.Second)
	r.site.Heal(dev) // offered again
}

// A device failing 3 times in the budget window (2 ladders per 7 days):
// the third fault is handed off for repair at once, held with the repair
// hold; the webhook reaches a receiver that answers 500 first, is retried
// and verified; closing the handoff releases the device to validation,
// not to customers.
func TestBudgetSpentHandsOff(t *testing.T) {
	r := newRig(t, ladderPolicy, 10, true)
	dev := r.site.IDs[0]
	r.fixOnce(dev)
	r.fixOnce(dev)
	r.site.Fault([]string{dev}, "DeployFailed", r.clk.Now())
	if s := r.tick(); s.HandedOff != 1 || s.Started != 0 {
		t.Fatalf("third fault: %+v", s)
	}
	if n := r.count(`SELECT count(*) FROM remediation_handoffs WHERE device_id = $1 AND reason = 'BudgetSpent' AND state = 'OPEN'`, dev); n != 1 {
		t.Fatal("no open BudgetSpent handoff")
	}
	if n := r.count(`SELECT count(*) FROM quarantine_holds WHERE device_id = $1 AND holder = 'repair'`, dev); n != 1 {
		t.Fatal("no repair hold")
	}
	if n := r.count(`SELECT count(*) FROM remediation_events WHERE device_id = $1 AND event = 'HANDED_OFF'`, dev); n != 1 {
		t.Fatal("no HANDED_OFF event")
	}
	r.tick() // idempotent
	if n := r.count(`SELECT count(*) FROM remediation_handoffs WHERE device_id = $1`, dev); n != 1 {
		t.Fatalf("%d handoffs", n)
	}

	rc := &receiver{secret: []byte("s3cret")}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	w := remediation.NewWebhookSender(r.st, remediation.WebhookConfig{URL: srv.URL, Secret: rc.secret,
		InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond}, testlog.New(t))
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for r.count(`SELECT count(*) FROM remediation_handoffs WHERE webhook_state = 'DELIVERED'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("not delivered; %d requests", rc.received())
		}
		if _, err := w.Deliver(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rc.received() != 2 || !rc.verified[0] || !rc.verified[1] {
		t.Fatalf("requests %d, verified %v", rc.received(), rc.verified)
	}
	var p remediation.HandoffPayload
	if err := json.Unmarshal(rc.bodies[1], &p); err != nil || p.DeviceID != dev || p.Reason != "BudgetSpent" || p.Attempt != 2 {
		t.Fatalf("payload %+v %v", p, err)
	}
	if n := r.count(`SELECT count(*) FROM remediation_webhook_attempts WHERE status_code = 500 AND attempt = 1`); n != 1 {
		t.Fatal("the 500 attempt is not recorded")
	}
	if n := r.count(`SELECT count(*) FROM remediation_webhook_attempts WHERE status_code = 204 AND attempt = 2`); n != 1 {
		t.Fatal("the delivered attempt is not recorded")
	}
	if n, _ := w.Deliver(ctx); n != 0 || rc.received() != 2 {
		t.Fatal("delivered again")
	}

	hs, err := r.st.ListHandoffs(ctx, storeFilterOpen(dev))
	if err != nil || len(hs) != 1 {
		t.Fatalf("handoffs %v %v", hs, err)
	}
	if _, err := r.st.CloseHandoff(ctx, hs[0].ID, "alice", "replaced DIMM B2", "test"); err != nil {
		t.Fatal(err)
	}
	if n := r.count(`SELECT count(*) FROM devices WHERE id = $1 AND desired_impairment = 'RELEASED_UNOFFERED'`, dev); n != 1 {
		t.Fatal("not released to validation (not offered)")
	}
	if n := r.count(`SELECT count(*) FROM quarantine_holds WHERE device_id = $1`, dev); n != 0 {
		t.Fatal("holds remain")
	}
	if _, err := r.st.CloseHandoff(ctx, hs[0].ID, "alice", "again", "test"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("second close: %v", err)
	}
}

// A 20-device burst with maxInFlight 2: never more than 2 steps in
// flight at the site; every device gets through its ladder (each step
// fails here) and is handed off.
func TestBurstAtMostKInFlight(t *testing.T) {
	r := newRig(t, ladderPolicy, 20, false)
	r.site.Fault(r.site.IDs, "DeployFailed", r.clk.Now())
	peak := 0
	for round := 0; round < 60 && r.count(`SELECT count(*) FROM remediation_handoffs`) < 20; round++ {
		r.tick()
		flying := r.count(`SELECT count(*) FROM remediation_steps WHERE state IN ('STARTING', 'RUNNING', 'SETTLING')`)
		active := r.count(`SELECT count(*) FROM operations WHERE state IN ('PENDING', 'RUNNING')`)
		if flying > 2 || active > 2 {
			t.Fatalf("round %d: %d steps in flight, %d operations active", round, flying, active)
		}
		peak = max(peak, active)
		if _, err := r.st.Pool().Exec(context.Background(), `UPDATE operations SET state = 'FAILED', last_error = 'injected', ended_at = now()
			WHERE state IN ('PENDING', 'RUNNING')`); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.count(`SELECT count(*) FROM remediation_handoffs WHERE reason = 'LadderExhausted'`); n != 20 {
		t.Fatalf("%d handed off, want 20", n)
	}
	if peak != 2 {
		t.Fatalf("peak %d in flight, want 2", peak)
	}
	if n := r.count(`SELECT count(*) FROM operations`); n != 40 {
		t.Fatalf("%d operations, want 40 (2 steps × 20, none repeated)", n)
	}
	if n := r.count(`SELECT count(*) FROM remediation_ladders WHERE waiting = '' AND state = 'HANDED_OFF'`); n != 20 {
		t.Fatalf("%d ladders ended handed off", n)
	}
	if n := r.count(`SELECT count(*) FROM remediation_events WHERE event = 'WAITING' AND detail LIKE 'MaxInFlight%'`); n == 0 {
		t.Fatal("no ladder waited for the in-flight limit")
	}
}

// A ladder in dry-run shows its plan ("would reboot X now, step 1 of 2",
// the in-flight limit applied) and writes nothing.
func TestDryRunWritesNothing(t *testing.T) {
	doc := strings.Replace(ladderPolicy, "settle: 2m", "settle: 2m\n          dryRun: true", 1)
	r := newRig(t, doc, 3, false)
	r.site.Fault(r.site.IDs, "DeployFailed", r.clk.Now())
	s := r.tick()
	if len(s.Plans) != 3 {
		t.Fatalf("plans %+v", s.Plans)
	}
	now := 0
	for _, p := range s.Plans {
		switch {
		case strings.Contains(p.Text, "now, step 1 of 2") && strings.HasPrefix(p.Text, "would reboot "):
			now++
		case !strings.Contains(p.Text, "MaxInFlight"):
			t.Errorf("plan %q", p.Text)
		}
	}
	if now != 2 {
		t.Errorf("%d plans act now, want 2 (maxInFlight)", now)
	}
	r.tick()
	for _, table := range []string{"remediation_ladders", "remediation_steps", "remediation_events", "remediation_handoffs", "operations"} {
		if n := r.count(`SELECT count(*) FROM ` + table); n != 0 {
			t.Errorf("%s has %d rows", table, n)
		}
	}
}

// A fault whose health condition recommends CONTACT_SUPPORT (the
// ladder's default handoffOn) is handed off at once, no step run.
func TestRecommendedActionHandsOff(t *testing.T) {
	r := newRig(t, ladderPolicy, 10, false)
	dev := r.site.IDs[0]
	at := r.clk.Now()
	conds := append(storetest.Healthy(at), condition.Condition{Type: condition.HealthType("GPU", "GpuXidError"), Status: condition.False,
		Reason: "XID79", Message: "GPU fell off the bus", LastTransitionTime: at, ObservedTime: at,
		Health: &condition.Health{Agent: "gpu-health", ComponentClass: "GPU", CheckName: "GpuXidError", Fatal: true,
			RecommendedAction: policy.RecommendedActions["CONTACT_SUPPORT"], ErrorCodes: []string{"79"}}})
	r.site.Send([]store.DeviceUpdate{{DeviceID: dev, Conditions: conds, ObservedTime: at}})
	if s := r.tick(); s.HandedOff != 1 || s.Started != 0 {
		t.Fatalf("pass: %+v", s)
	}
	if n := r.count(`SELECT count(*) FROM remediation_handoffs WHERE device_id = $1 AND reason = 'RecommendedAction'
		AND detail LIKE '%CONTACT_SUPPORT%' AND webhook_state = 'NONE'`, dev); n != 1 {
		t.Fatal("no RecommendedAction handoff")
	}
	if n := r.count(`SELECT count(*) FROM operations`); n != 0 {
		t.Fatalf("%d operations", n)
	}
}

package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/ctl"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

// signedHook is the repair team's end of the handoff webhook: it checks
// every POST's X-Ironlink-Signature-256 against its own HMAC-SHA256 of the
// body (as docs/reference/ironlink-hub.md describes it, not through
// ironlink's code), answers 500 to the first POST and 204 to the rest.
type signedHook struct {
	secret []byte
	mu     sync.Mutex
	bodies [][]byte
	ok     []bool
}

func (h *signedHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	mac := hmac.New(sha256.New, h.secret)
	mac.Write(body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	h.mu.Lock()
	h.bodies = append(h.bodies, body)
	h.ok = append(h.ok, r.Method == http.MethodPost && hmac.Equal([]byte(want), []byte(r.Header.Get("X-Ironlink-Signature-256"))) &&
		r.Header.Get("X-Ironlink-Event") == "repair_handoff")
	first := len(h.bodies) == 1
	h.mu.Unlock()
	if first {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *signedHook) got() ([][]byte, []bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.bodies), slices.Clone(h.ok)
}

// ladderSim is one site of real processes over openstacksim: the hub
// (its policy file, policy pass every 200 ms) and the satellite with its
// operations credential.
type ladderSim struct {
	t     *testing.T
	sim   *openstacksim.Cloud
	db    string
	cc    *grpc.ClientConn
	fleet ironlinkv1.FleetServiceClient
	rem   ironlinkv1.RemediationServiceClient
	ops   ironlinkv1.OperationServiceClient
	pol   ironlinkv1.PolicyServiceClient
	nodes []openstacksim.Node
}

const ladderSimSite = "ladder-sim"

// startLadderSim seeds n nodes like the test bed and starts the hub with
// policyDoc (and hubArgs) and the site's satellite.
func startLadderSim(t *testing.T, n int, policyDoc string, hubArgs ...string) *ladderSim {
	t.Helper()
	sim := openstacksim.New(openstacksim.Options{ProvisionStep: 200 * time.Millisecond})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	nodes := sim.SeedLikeTestbed(n)
	clouds := writeSimOpsClouds(t, sim)
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(policyDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	db := pgtest.NewDatabase(t)
	id := newIdentity(t, []string{ladderSimSite}, map[string][]string{"ops-admin": {auth.ScopeOperationsRead, auth.ScopeOperationsWrite}})
	addr, _ := startHub(t, db, id, append([]string{"--policy-file", policyFile, "--policy-interval", "200ms", "--heartbeat-interval", "1s"}, hubArgs...)...)
	// The test polls every device 10 times a second, over the per-client
	// rate limit at times: retry as the CLI does.
	cc := id.dialAs(t, addr, "ops-admin", grpc.WithChainUnaryInterceptor(ctl.RetryRateLimited))
	harness.Start(t, "ironlink-satellite", bins.Satellite(), append([]string{"--site", ladderSimSite, "--hub", addr, "--clouds-yaml", clouds,
		"--cloud", "sim", "--operations-cloud", "sim-ops", "--operations-poll-interval", "200ms",
		"--state-file", filepath.Join(t.TempDir(), "state.json"), "--poll-interval", "1s", "--max-backoff", "2s"}, id.satelliteArgs(ladderSimSite)...)...)
	return &ladderSim{t: t, sim: sim, db: db, cc: cc, nodes: nodes,
		fleet: ironlinkv1.NewFleetServiceClient(cc), rem: ironlinkv1.NewRemediationServiceClient(cc),
		ops: ironlinkv1.NewOperationServiceClient(cc), pol: ironlinkv1.NewPolicyServiceClient(cc)}
}

// readyNodes are the seeded nodes offered to customers (available with
// CUSTOM_CUSTOMER_READY).
func (l *ladderSim) readyNodes() []openstacksim.Node {
	var out []openstacksim.Node
	for i, n := range l.nodes {
		if strings.HasPrefix(openstacksim.SeedRole(i+1), "available-ready") {
			out = append(out, n)
		}
	}
	return out
}

// waitStatus waits until every device of ids shows want.
func (l *ladderSim) waitStatus(within time.Duration, want ironlinkv1.OperationalStatus, ids ...string) {
	l.t.Helper()
	harness.Eventually(l.t, within, func() error {
		for _, id := range ids {
			r, err := l.fleet.GetDevice(context.Background(), &ironlinkv1.GetDeviceRequest{DeviceId: id})
			if err != nil {
				return err
			}
			if got := r.GetDevice().GetStatus(); got != want {
				return fmt.Errorf("device %s: status %v, want %v", id, got, want)
			}
		}
		return nil
	})
}

// cleanFails makes Ironic's cleaning of node id fail, as a disk that does
// not erase would: clean failed with Ironic's last_error (the device turns
// FAULTED, ProvisioningHealthy=False). A REBOOT does not change that; a
// REPROVISION (manage, provide: cleaning again) does.
func (l *ladderSim) cleanFails(id string) {
	l.t.Helper()
	if err := l.sim.UpdateNode(id, func(n *openstacksim.Node) {
		n.ProvisionState, n.TargetProvisionState = "clean failed", "manageable"
		n.LastError = "Agent returned error for clean step erase_devices on node: disk /dev/sdb did not erase"
	}); err != nil {
		l.t.Fatal(err)
	}
}

// remediation is the device's remediation as `ironlink explain` reads it.
func (l *ladderSim) remediation(id string) *ironlinkv1.GetDeviceRemediationResponse {
	l.t.Helper()
	r, err := l.rem.GetDeviceRemediation(context.Background(), &ironlinkv1.GetDeviceRemediationRequest{Device: id})
	if err != nil {
		l.t.Fatal(err)
	}
	return r
}

// decisions renders the device's status and policy decisions for a
// failure's message.
func (l *ladderSim) decisions(id string) string {
	d, err := l.fleet.GetDevice(context.Background(), &ironlinkv1.GetDeviceRequest{DeviceId: id})
	if err != nil {
		return err.Error()
	}
	r, err := l.pol.ListPolicyDecisions(context.Background(), &ironlinkv1.ListPolicyDecisionsRequest{DeviceId: id})
	if err != nil {
		return err.Error()
	}
	out := "status " + d.GetDevice().GetStatus().String() + "; decisions:"
	for _, x := range r.GetDecisions() {
		out += fmt.Sprintf(" [%s %s→%s %s %s %s]", x.GetAction(), x.GetFromStatus(), x.GetToStatus(), x.GetReason(), x.GetRule(), x.GetDetail())
	}
	return out
}

// operations lists the device's operations, oldest first.
func (l *ladderSim) operations(id string) []*ironlinkv1.Operation {
	l.t.Helper()
	r, err := l.ops.ListOperations(context.Background(), &ironlinkv1.ListOperationsRequest{Device: id, PageSize: 100})
	if err != nil {
		l.t.Fatal(err)
	}
	out := r.GetOperations()
	slices.SortFunc(out, func(a, b *ironlinkv1.Operation) int {
		return a.GetCreateTime().AsTime().Compare(b.GetCreateTime().AsTime())
	})
	return out
}

// ironicWrites are the simulator's answered requests other than reads and
// Keystone's token requests.
func (l *ladderSim) ironicWrites() []string {
	var out []string
	for _, r := range l.sim.Requests() {
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !strings.Contains(r.Path, "/auth/tokens") {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}

const ladderSimPolicy = `
policy:
  default:
    enabled: true
    guard: {maxDevices: 5, maxPercent: 100, window: 1h}
    rules:
      - name: clean-failed
        to: [FAULTED]
        remediation:
          steps:
            - {action: REBOOT, timeout: 4s}
            - {action: REPROVISION, timeout: 1m}
          settle: 3s
          budget: {ladders: 2, window: 1h}
`

// The "Done when" in the simulator, on real processes
// (ironlink-hub with its policy and handoff webhook, ironlink-satellite
// with its operations credential, openstacksim, PostgreSQL): a node's
// cleaning fails → the device is quarantined → REBOOT (the fault persists
// past the step's timeout) → REPROVISION (manage, provide: cleaning
// again) → healthy → released after the settle time and offered again,
// the ladder naming step 2 as the fix. The same device failing a second
// time is fixed the same way; failing a third time within the budget's
// window (2 ladders per hour) it is handed off: the webhook's first POST
// answered 500 is retried, both POSTs carry a valid HMAC-SHA256
// signature. Every step made one operation and Ironic saw each provision
// request once. Replaying the live policy over the run reproduces its
// decisions and remediations with 0 differences, writing nothing; the
// repaired device's closed handoff releases it to validation, not to
// customers.
func TestLadderDoneWhenSimulator(t *testing.T) {
	hook := &signedHook{secret: []byte("0123456789abcdef-handoff")}
	hookSrv := httptest.NewServer(hook)
	t.Cleanup(hookSrv.Close)
	secretFile := filepath.Join(t.TempDir(), "hook.secret")
	if err := os.WriteFile(secretFile, hook.secret, 0o600); err != nil {
		t.Fatal(err)
	}
	l := startLadderSim(t, 10, ladderSimPolicy, "--handoff-webhook-url", hookSrv.URL, "--handoff-webhook-secret-file", secretFile)
	node := l.nodes[0] // available-ready: offered to customers
	l.waitStatus(time.Minute, ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE, node.UUID)
	from := time.Now().Add(-time.Second)
	var ladderIDs []int64
	for round := 1; round <= 2; round++ {
		t0 := time.Now()
		l.cleanFails(node.UUID)
		var last *ironlinkv1.GetDeviceRemediationResponse
		harness.Eventually(t, 2*time.Minute, func() error {
			last = l.remediation(node.UUID)
			lr := last.GetLadderRun()
			if lr.GetState() != "SUCCEEDED" || slices.Contains(ladderIDs, lr.GetId()) {
				return fmt.Errorf("round %d: ladder %d %q: %s; %s", round, lr.GetId(), lr.GetState(), last.GetPlan(), l.decisions(node.UUID))
			}
			return nil
		})
		lr := last.GetLadderRun()
		ladderIDs = append(ladderIDs, lr.GetId())
		if lr.GetFixedStep() != 2 || lr.GetFixedKind() != "REPROVISION" || !lr.GetReleased() || len(lr.GetSteps()) != 2 ||
			lr.GetSteps()[0].GetState() != "FAILED" || lr.GetSteps()[1].GetState() != "SUCCEEDED" ||
			!strings.Contains(lr.GetSteps()[0].GetDetail(), "the fault persists") {
			t.Fatalf("round %d: ladder %s", round, protojson.Format(lr))
		}
		if last.GetAttemptsUsed() != int32(round) || last.GetAttemptsLeft() != int32(2-round) {
			t.Errorf("round %d: attempts used %d, left %d", round, last.GetAttemptsUsed(), last.GetAttemptsLeft())
		}
		l.waitStatus(time.Minute, ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE, node.UUID)
		t.Logf("MEASURE round %d: clean failed → quarantined → REBOOT (fault persists 4s) → REPROVISION → settled 3s → released, offered again: %s",
			round, time.Since(t0).Round(time.Millisecond))
	}

	// The third failure in the window: handed off, no ladder.
	l.cleanFails(node.UUID)
	var handoff *ironlinkv1.Handoff
	harness.Eventually(t, 2*time.Minute, func() error {
		hs := l.remediation(node.UUID).GetHandoffs()
		if len(hs) != 1 || hs[0].GetWebhookState() != "DELIVERED" {
			return fmt.Errorf("handoffs %v", hs)
		}
		handoff = hs[0]
		return nil
	})
	if handoff.GetReason() != "BudgetSpent" || handoff.GetState() != "OPEN" || handoff.GetWebhookAttempts() != 2 {
		t.Fatalf("handoff %s", protojson.Format(handoff))
	}
	bodies, verified := hook.got()
	if len(bodies) != 2 || !verified[0] || !verified[1] {
		t.Fatalf("webhook: %d POSTs, signatures valid %v; want 2 valid (the 500 retried)", len(bodies), verified)
	}
	var payload map[string]any
	if err := json.Unmarshal(bodies[1], &payload); err != nil || payload["device_id"] != node.UUID || payload["reason"] != "BudgetSpent" {
		t.Fatalf("webhook payload %s: %v", bodies[1], err)
	}

	// One operation per step, none repeated; Ironic saw each provision
	// request once: manage and provide per REPROVISION.
	ops := l.operations(node.UUID)
	var kinds []string
	for _, o := range ops {
		kinds = append(kinds, strings.TrimPrefix(o.GetKind().String(), "OPERATION_KIND_")+" "+strings.TrimPrefix(o.GetState().String(), "OPERATION_STATE_"))
		if o.GetKind() == ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION && (provisionRequests(o, "manage") != 1 || provisionRequests(o, "provide") != 1) {
			t.Errorf("REPROVISION %s: manage %d, provide %d requests", o.GetOperationId(), provisionRequests(o, "manage"), provisionRequests(o, "provide"))
		}
	}
	if want := []string{"REBOOT SUCCEEDED", "REPROVISION SUCCEEDED", "REBOOT SUCCEEDED", "REPROVISION SUCCEEDED"}; !slices.Equal(kinds, want) {
		t.Fatalf("operations %v, want %v", kinds, want)
	}
	provision := 0
	for _, w := range l.ironicWrites() {
		if strings.HasSuffix(w, "/states/provision") {
			provision++
		}
	}
	if provision != 4 {
		t.Errorf("Ironic saw %d provision requests, want 4 (manage and provide, twice)", provision)
	}

	// Replay the live policy over the run: 0 differences, nothing written.
	tables := `SELECT (SELECT count(*) FROM remediation_ladders) + (SELECT count(*) FROM remediation_steps) + (SELECT count(*) FROM remediation_handoffs)
		+ (SELECT count(*) FROM operations) + (SELECT count(*) FROM policy_decisions) + (SELECT count(*) FROM quarantine_holds)`
	before := pgtest.Count(t, l.db, tables)
	rep, err := l.pol.ReplayPolicy(context.Background(), &ironlinkv1.ReplayPolicyRequest{FromTime: timestamppb.New(from), ToTime: timestamppb.Now()})
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, r := range rep.GetRemediations() {
		outcomes = append(outcomes, fmt.Sprintf("%s/%d/%s", r.GetOutcome(), r.GetFixedStep(), r.GetHandoffReason()))
	}
	if rep.GetDifferences() != 0 || rep.GetRemediationDifferences() != 0 ||
		!slices.Equal(outcomes, []string{"FIXED/2/", "FIXED/2/", "HANDED_OFF/0/BudgetSpent"}) {
		t.Fatalf("replay: %d decision and %d remediation differences, remediations %v\n%s",
			rep.GetDifferences(), rep.GetRemediationDifferences(), outcomes, protojson.Format(rep))
	}
	if after := pgtest.Count(t, l.db, tables); after != before {
		t.Errorf("the replay wrote: %d rows before, %d after", before, after)
	}

	// Repaired: the operator closes the handoff; the device goes to
	// validation, not to customers.
	if err := l.sim.UpdateNode(node.UUID, func(n *openstacksim.Node) {
		n.ProvisionState, n.TargetProvisionState, n.LastError = "available", "", ""
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.rem.CloseHandoff(context.Background(), &ironlinkv1.CloseHandoffRequest{Id: handoff.GetId(), Note: "replaced disk sdb"}); err != nil {
		t.Fatal(err)
	}
	if n := pgtest.Count(t, l.db, `SELECT count(*) FROM devices WHERE id = $1 AND desired_impairment = 'RELEASED_UNOFFERED'`, node.UUID); n != 1 {
		t.Fatal("the closed handoff did not release the device to validation")
	}
	if traits, _, _ := l.sim.ProviderTraits(node.UUID); slices.Contains(traits, openstacksim.ReadyTrait) {
		t.Fatal("the closed handoff offered the device to customers")
	}
}

// stepSpan is one ladder step's time in flight.
type stepSpan struct{ start, end time.Time }

// peakInFlight is the most spans open at once (a span ending when another
// starts is not counted with it: the hub frees the slot in the same pass).
func peakInFlight(spans []stepSpan) int {
	type edge struct {
		at time.Time
		d  int
	}
	var es []edge
	for _, s := range spans {
		es = append(es, edge{s.start, 1}, edge{s.end, -1})
	}
	slices.SortFunc(es, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.d - b.d // ends first
	})
	n, peak := 0, 0
	for _, e := range es {
		n += e.d
		peak = max(peak, n)
	}
	return peak
}

// The 20-device burst on real processes over openstacksim: the
// cleaning of 20 offered nodes fails at once; the policy quarantines all
// 20 (guard 20) and their ladders (one REPROVISION step) run at most 2 at
// a time (remediation.maxInFlight: 2), read back from the steps' recorded
// times and the operations' start and end times; the others wait
// (MaxInFlight) and every device is fixed and released in the end.
func TestLadderBurstSimulator(t *testing.T) {
	l := startLadderSim(t, 100, `
policy:
  default:
    enabled: true
    guard: {maxDevices: 20, maxPercent: 100, window: 1h}
    remediation: {maxInFlight: 2}
    rules:
      - name: clean-failed
        to: [FAULTED]
        remediation:
          steps:
            - {action: REPROVISION, timeout: 1m}
          settle: 1s
`)
	ready := l.readyNodes()
	if len(ready) != 20 {
		t.Fatalf("%d offered nodes seeded, want 20", len(ready))
	}
	var ids []string
	for _, n := range ready {
		ids = append(ids, n.UUID)
	}
	l.waitStatus(time.Minute, ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE, ids...)
	t0 := time.Now()
	for _, id := range ids {
		l.cleanFails(id)
	}
	var steps, ops []stepSpan
	harness.Eventually(t, 4*time.Minute, func() error {
		steps, ops = nil, nil
		for _, id := range ids {
			r := l.remediation(id)
			lr := r.GetLadderRun()
			if lr.GetState() != "SUCCEEDED" || !lr.GetReleased() {
				return fmt.Errorf("device %s: ladder %q %s", id, lr.GetState(), r.GetPlan())
			}
			for _, s := range lr.GetSteps() {
				steps = append(steps, stepSpan{s.GetStartTime().AsTime(), s.GetEndTime().AsTime()})
			}
			for _, o := range l.operations(id) {
				ops = append(ops, stepSpan{o.GetCreateTime().AsTime(), o.GetEndTime().AsTime()})
			}
		}
		return nil
	})
	took := time.Since(t0)
	if len(steps) != 20 || len(ops) != 20 {
		t.Fatalf("%d steps, %d operations; want 20 of each (one per device, none repeated)", len(steps), len(ops))
	}
	if p := peakInFlight(steps); p != 2 {
		t.Errorf("at most %d ladder steps in flight at once, want 2 (maxInFlight)", p)
	}
	if p := peakInFlight(ops); p > 2 {
		t.Errorf("%d REPROVISION operations at once, want at most 2", p)
	}
	if n := pgtest.Count(t, l.db, `SELECT count(*) FROM remediation_events WHERE event = 'WAITING' AND detail LIKE '%in flight at site `+ladderSimSite+` (at most 2)%'`); n == 0 {
		t.Error("no ladder recorded waiting for the in-flight limit")
	}
	l.waitStatus(time.Minute, ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE, ids...)
	t.Logf("MEASURE burst: 20 devices faulted at once, fixed 2 at a time and released: %s", took.Round(time.Millisecond))
}

// A dry-run ladder on real processes over openstacksim: the rule
// quarantines (it is live), its ladder only plans — `explain` shows
// "would reprovision … now, step 1 of 1" — and writes nothing: no ladder,
// step, event or handoff row, no operation, and Ironic sees no request
// but the quarantine's.
func TestLadderDryRunSimulator(t *testing.T) {
	l := startLadderSim(t, 10, `
policy:
  default:
    enabled: true
    guard: {maxDevices: 5, maxPercent: 100, window: 1h}
    rules:
      - name: clean-failed
        to: [FAULTED]
        remediation:
          steps:
            - {action: REPROVISION, timeout: 1m}
          settle: 1s
          dryRun: true
`)
	ready := l.readyNodes()
	id := ready[0].UUID
	l.waitStatus(time.Minute, ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE, id)
	l.sim.ResetRequests()
	l.cleanFails(id)
	harness.Eventually(t, time.Minute, func() error {
		r := l.remediation(id)
		if !r.GetDryRun() || !strings.HasPrefix(r.GetPlan(), "would reprovision ") || !strings.Contains(r.GetPlan(), "now, step 1 of 1") {
			return fmt.Errorf("plan %q (dry-run %v); %s", r.GetPlan(), r.GetDryRun(), l.decisions(id))
		}
		return nil
	})
	// Several policy passes later, still nothing written.
	time.Sleep(2 * time.Second)
	for _, table := range []string{"remediation_ladders", "remediation_steps", "remediation_events", "remediation_handoffs", "operations"} {
		if n := pgtest.Count(t, l.db, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("%s has %d rows", table, n)
		}
	}
	for _, w := range l.ironicWrites() {
		if strings.Contains(w, "/states/") || strings.Contains(w, "/maintenance") {
			t.Errorf("Ironic received %s", w)
		}
	}
	if r := l.remediation(id); r.GetLadderRun() != nil {
		t.Errorf("a ladder ran: %s", protojson.Format(r.GetLadderRun()))
	}
}

package web

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/remediation"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/testlog"
)

const remediationPagePolicy = `
policy:
  default:
    enabled: true
    rules:
      - name: gpu-fatal
        to: [FAULTED]
        remediation:
          steps:
            - {action: REBOOT, timeout: 15m}
            - {action: REPROVISION, timeout: 1h}
          settle: 10m
          budget: {ladders: 3, window: 168h}
`

// TestDeviceRemediationSection: the device page's Remediation section says
// what `ironlink explain` says: the attempts used and left in the budget
// window, and the next step and when: after step 1 the next is step 2 at
// step 1's timeout; on the last step of the last ladder the budget allows,
// no attempt is left and the next is the handoff; a paused ladder says it
// waits for its disabled policy.
func TestDeviceRemediationSection(t *testing.T) {
	e := newEnv(t)
	f, err := policy.Parse([]byte(remediationPagePolicy))
	if err != nil {
		t.Fatal(err)
	}
	s := consoleView(t, e)
	s.SetRemediation(remediation.NewAPI(e.st, func() *policy.File { return f }, actor, testlog.New(t)))
	h := s.Handler()
	ctx := context.Background()
	gen := int64(0)
	dev := func(i int) store.RemediationDevice { // one quarantine (hold generation) per ladder
		gen++
		return store.RemediationDevice{DeviceID: e.ids["alpha"][i], Site: "alpha", Rule: "gpu-fatal", HoldGeneration: gen}
	}
	start := func(d store.RemediationDevice, step int, kind string, at time.Time) {
		t.Helper()
		l, ok, err := e.st.StartLadder(ctx, d, 2, "ProvisioningHealthy=False: DeployFailed")
		if err != nil || !ok {
			t.Fatalf("start ladder: %v %v", ok, err)
		}
		for i := 0; i < step; i++ { // the earlier steps failed
			if ok, err := e.st.StartStep(ctx, l, i, "REBOOT", remediation.OperationID(l.ID, i), "reboot", at); err != nil || !ok {
				t.Fatalf("start step %d: %v %v", i+1, ok, err)
			}
			cur := store.RemediationStep{Step: i, Kind: "REBOOT", OperationID: remediation.OperationID(l.ID, i), State: store.StepStarting, StartedAt: at}
			if _, err := e.st.UpdateStep(ctx, l, cur, store.StepUpdate{State: store.StepFailed, Advance: true, Event: "STEP_FAILED", Detail: "injected"}); err != nil {
				t.Fatal(err)
			}
			l.Position++
		}
		if ok, err := e.st.StartStep(ctx, l, step, kind, remediation.OperationID(l.ID, step), "now", at); err != nil || !ok {
			t.Fatalf("start step %d: %v %v", step+1, ok, err)
		}
	}
	section := func(name string) string {
		t.Helper()
		w := do(t, h, "GET", "/devices/"+name, "ops-read", "", nil, nil)
		body := html.UnescapeString(w.Body.String())
		i := strings.Index(body, `<section id="remediation">`)
		if w.Code != http.StatusOK || i < 0 {
			t.Fatalf("GET /devices/%s: %d, no Remediation section: %.600s", name, w.Code, body)
		}
		return body[i:]
	}
	at := time.Now().Add(-time.Minute).Truncate(time.Second)

	// a-faulted-1: its first ladder, step 1 (REBOOT) in progress.
	start(dev(0), 0, "REBOOT", at)
	got := section("a-faulted-1")
	due := at.Add(15 * time.Minute).UTC()
	for _, want := range []string{
		"<dt>Attempts</dt><dd>1 used, 2 left in 168h0m0s</dd>",
		fmt.Sprintf(`<dt>Next</dt><dd id="ladder-next">step 1 of 2 (REBOOT) STARTING; if the fault persists, step 2 (REPROVISION) at %s (at <span title="%s">%[2]s</span>)</dd>`,
			due.Format(time.RFC3339), due.Format("2006-01-02 15:04:05Z")),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("a-faulted-1's Remediation section lacks %q:\n%.1500s", want, got)
		}
	}

	// a-maint: a ladder paused by its site's disabled policy before step 1.
	l, ok, err := e.st.StartLadder(ctx, dev(2), 2, "MaintenanceClear=False: PowerFailure")
	if err != nil || !ok {
		t.Fatalf("start ladder: %v %v", ok, err)
	}
	if err := e.st.SetLadderWaiting(ctx, l, remediation.WaitPolicyDisabled, "paused at step 1"); err != nil {
		t.Fatal(err)
	}
	got = section("a-maint")
	for _, want := range []string{
		"<dt>Attempts</dt><dd>1 used, 2 left in 168h0m0s</dd>",
		`<dt>Next</dt><dd id="ladder-next">reboot a-maint next, step 1 of 2, waiting: PolicyDisabled (paused at step 1)</dd>`,
		"<strong>Waiting: PolicyDisabled</strong> — the site's policy is disabled (enabled: false): the ladder is paused where it is",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("a-maint's Remediation section lacks %q:\n%.1500s", want, got)
		}
	}

	// a-faulted-2: two ladders ended in the window, the third on its last step.
	for range 2 {
		l, ok, err := e.st.StartLadder(ctx, dev(1), 2, "earlier fault")
		if err != nil || !ok {
			t.Fatalf("start ladder: %v %v", ok, err)
		}
		if _, err := e.st.FinishLadder(ctx, l, store.LadderAbandoned, 0, "", "ABANDONED", "released by an operator", false); err != nil {
			t.Fatal(err)
		}
	}
	start(dev(1), 1, "REPROVISION", at)
	got = section("a-faulted-2")
	due = at.Add(time.Hour).UTC()
	for _, want := range []string{
		"<dt>Attempts</dt><dd>3 used, 0 left in 168h0m0s</dd>",
		fmt.Sprintf(`<dt>Next</dt><dd id="ladder-next">step 2 of 2 (REPROVISION) STARTING; if the fault persists, hand off for repair at %s (at`,
			due.Format(time.RFC3339)),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("a-faulted-2's Remediation section lacks %q:\n%.1500s", want, got)
		}
	}
}

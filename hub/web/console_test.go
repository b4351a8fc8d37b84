package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/policyapi"
	"github.com/ironlink/ironlink/hub/remediation"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/testlog"
)

// consoleServer is the view with operations, the policy API and the
// remediation API wired as the hub wires them.
func consoleServer(t *testing.T, e *env) http.Handler { return consoleView(t, e).Handler() }

// consoleView is consoleServer's view.
func consoleView(t *testing.T, e *env) *Server {
	t.Helper()
	if _, err := e.st.OpenLink(context.Background(), store.LinkHello{Site: "alpha", BootID: uuid.NewString(), Replica: "r0", Capabilities: []string{operations.Capability}}); err != nil {
		t.Fatal(err)
	}
	s := e.server(t, proxyCfg)
	s.SetOperations(operations.NewServer(e.st, operations.Config{Actor: actor}, testlog.New(t)))
	pol := policyapi.NewServer(e.st, policy.Static(policy.Disabled()), actor, testlog.New(t))
	pol.SetReplayDB(e.st.Pool())
	s.SetPolicy(pol)
	s.SetRemediation(remediation.NewAPI(e.st, func() *policy.File { return policy.Disabled() }, actor, testlog.New(t)))
	return s
}

// TestConsolePagesRender: every page answers 200 for a reader, with its
// marker, and a device page opens by name, SITE/NAME and id prefix.
func TestConsolePagesRender(t *testing.T) {
	e := newEnv(t)
	h := consoleServer(t, e)
	dev := e.ids["alpha"][0]
	for path, marker := range map[string]string{
		"/sites/alpha": `id="site-counts"`, "/operations": `id="operations"`, "/commands": `id="commands"`,
		"/policy": `id="policy-states"`, "/holds": `id="holds"`, "/devices/a-faulted-1": `id="device-holds"`,
		"/devices/alpha/a-faulted-1": `id="device-holds"`, "/devices/" + dev[:8]: `id="device-holds"`,
	} {
		w := do(t, h, "GET", path, "ops-read", "", nil, nil)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), marker) {
			t.Errorf("GET %s: %d, want 200 with %s: %.400s", path, w.Code, marker, w.Body.String())
		}
	}
	if w := do(t, h, "GET", "/sites/nowhere", "ops-read", "", nil, nil); w.Code != http.StatusNotFound {
		t.Errorf("unknown site: %d", w.Code)
	}
	// A mistyped UUID is "not a UUID", as the API says, never a name lookup.
	if w := do(t, h, "GET", "/devices/ce7c6a1d-0000-0000-0000-00000000000", "ops-read", "", nil, nil); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "not a UUID") {
		t.Errorf("malformed UUID: %d %s", w.Code, w.Body.String())
	}
	// An idle AVAILABLE device's InstanceAllocated=False is neutral, not red.
	w := do(t, h, "GET", "/devices/a-avail-1", "ops-read", "", nil, nil)
	if !strings.Contains(w.Body.String(), `class="cond cond-flag-off" title="InstanceAllocated=False"`) {
		t.Errorf("InstanceAllocated=False is not neutral on an idle device")
	}
	if w := do(t, h, "GET", "/devices/a-faulted-1", "ops-read", "", nil, nil); !strings.Contains(w.Body.String(), `class="cond cond-fault" title="ProvisioningHealthy=False"`) {
		t.Errorf("ProvisioningHealthy=False is not a fault")
	}
}

// TestConsoleWrites: a reader's POSTs are 403 with the reason and write
// nothing; ticked rows are quarantined after a preview with the count, a
// stale count is refused, a selector goes through BulkService, a release
// preview counts outcomes, and holds are set and cleared.
func TestConsoleWrites(t *testing.T) {
	e := newEnv(t)
	h := consoleServer(t, e)
	ctx := context.Background()
	a1, a2 := e.ids["alpha"][3], e.ids["alpha"][4] // a-avail-1, a-avail-2
	for _, path := range []string{"/devices/bulk/preview", "/devices/bulk", "/holds", "/holds/clear", "/policy/pending/approve", "/operations", "/operations/" + uuid.NewString() + "/cancel", "/commands/" + uuid.NewString() + "/retry", "/devices/" + a1 + "/offer"} {
		w := do(t, h, "POST", path, "ops-read", "", url.Values{"verb": {"quarantine"}, "device": {a1}, "reason": {"x"}, "expected_count": {"1"}}, nil)
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "lacks the operations:write scope") {
			t.Errorf("read-only POST %s: %d %.300s", path, w.Code, w.Body.String())
		}
	}
	if n := commandCount(t, e, a1); n != 0 {
		t.Fatalf("read-only POSTs wrote %d commands", n)
	}
	ticked := url.Values{"verb": {"quarantine"}, "device": {a1, a2}}
	w := do(t, h, "POST", "/devices/bulk/preview", "ops-write", "", ticked, nil)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `<strong id="bulk-count">2</strong>`) || !strings.Contains(w.Body.String(), `name="expected_count" value="2"`) {
		t.Fatalf("preview of 2 ticked: %d %.600s", w.Code, w.Body.String())
	}
	stale := url.Values{"verb": {"quarantine"}, "device": {a1, a2}, "expected_count": {"3"}, "reason": {"rack r4"}}
	if w := do(t, h, "POST", "/devices/bulk", "ops-write", "", stale, nil); w.Code != http.StatusConflict {
		t.Fatalf("stale count: %d %s", w.Code, w.Body.String())
	}
	noReason := url.Values{"verb": {"quarantine"}, "device": {a1, a2}, "expected_count": {"2"}, "reason": {" "}}
	if w := do(t, h, "POST", "/devices/bulk", "ops-write", "", noReason, nil); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "reason is required") {
		t.Fatalf("no reason: %d %s", w.Code, w.Body.String())
	}
	if commandCount(t, e, a1)+commandCount(t, e, a2) != 0 {
		t.Fatal("refused bulk calls wrote commands")
	}
	ok := url.Values{"verb": {"quarantine"}, "device": {a1, a2}, "expected_count": {"2"}, "reason": {"rack r4"}}
	// Ticked rows go through BulkService: one transaction, one request id.
	if w := do(t, h, "POST", "/devices/bulk", "ops-write", "", ok, nil); w.Code != 200 || !strings.Contains(w.Body.String(), "<strong>2</strong> commands created under request") {
		t.Fatalf("bulk quarantine: %d %.500s", w.Code, w.Body.String())
	}
	rel := url.Values{"verb": {"release"}, "selector": {"site=alpha,name=a-avail-*"}}
	w = do(t, h, "POST", "/devices/bulk/preview", "ops-write", "", rel, nil)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `<strong id="bulk-count">3</strong>`) || !strings.Contains(w.Body.String(), "RELEASE_OUTCOME_RESTORED_OFFERED") {
		t.Fatalf("selector release preview: %d %.800s", w.Code, w.Body.String())
	}
	rel.Set("expected_count", "3")
	rel.Set("reason", "rack r4 fixed")
	if w := do(t, h, "POST", "/devices/bulk", "ops-write", "", rel, nil); w.Code != 200 || !strings.Contains(w.Body.String(), "/commands?request_id=") {
		t.Fatalf("selector release: %d %.500s", w.Code, w.Body.String())
	}
	hold := url.Values{"device": {"a-maint"}, "kind": {"maintenance"}, "reason": {"PSU swap"}, "end": {"4h"}}
	if w := do(t, h, "POST", "/holds", "ops-write", "", hold, nil); w.Code != http.StatusSeeOther {
		t.Fatalf("set hold: %d %s", w.Code, w.Body.String())
	}
	if w := do(t, h, "GET", "/holds", "ops-read", "", nil, nil); !strings.Contains(w.Body.String(), "PSU swap") {
		t.Fatalf("holds page lacks the hold: %s", w.Body.String())
	}
	if w := do(t, h, "POST", "/holds", "ops-write", "", url.Values{"device": {"a-maint"}, "kind": {"maintenance"}, "reason": {"x"}, "end": {"soon"}}, nil); w.Code != http.StatusBadRequest {
		t.Fatalf("bad end: %d", w.Code)
	}
	if w := do(t, h, "POST", "/holds/clear", "ops-write", "", url.Values{"device": {"a-maint"}, "kind": {"maintenance"}}, nil); w.Code != http.StatusSeeOther {
		t.Fatalf("clear hold: %d %s", w.Code, w.Body.String())
	}
	if hs, err := listHolds(ctx, e.st.Pool(), holdFilter{Site: "alpha"}); err != nil || len(hs) != 0 {
		t.Fatalf("holds after release and clear: %+v %v", hs, err)
	}
}

func commandCount(t *testing.T, e *env, dev string) int {
	t.Helper()
	var n int
	if err := e.st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM commands WHERE device_id = $1`, dev).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestConsoleCrossSiteAndRetry: every new state-changing form refuses a
// cross-site POST (the CSRF protection) and writes nothing; a HELD
// device is offered; a FAILED command is retried as a new generation.
func TestConsoleCrossSiteAndRetry(t *testing.T) {
	e := newEnv(t)
	h := consoleServer(t, e)
	ctx := context.Background()
	held := e.ids["alpha"][7] // a_held%
	form := url.Values{"verb": {"quarantine"}, "device": {held}, "reason": {"x"}, "expected_count": {"1"}, "kind": {"exclusion"}}
	for _, path := range []string{"/devices/bulk/preview", "/devices/bulk", "/devices/" + held + "/offer", "/holds", "/holds/clear",
		"/policy/pending/approve", "/operations", "/commands/" + uuid.NewString() + "/retry"} {
		w := do(t, h, "POST", path, "ops-write", "", form, map[string]string{"Sec-Fetch-Site": "cross-site"})
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "cross-origin") {
			t.Errorf("cross-site POST %s: %d %s", path, w.Code, w.Body.String())
		}
	}
	if n := commandCount(t, e, held); n != 0 {
		t.Fatalf("cross-site POSTs wrote %d commands", n)
	}
	if hs, err := listHolds(ctx, e.st.Pool(), holdFilter{}); err != nil || len(hs) != 0 {
		t.Fatalf("cross-site POSTs set holds: %v %v", hs, err)
	}
	w := do(t, h, "POST", "/devices/"+held+"/offer", "ops-write", "", url.Values{"reason": {"ready for customers"}}, nil)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("offer: %d %s", w.Code, w.Body.String())
	}
	var cmdID string
	var gen int64
	if err := e.st.Pool().QueryRow(ctx, `SELECT id::text, generation FROM commands WHERE device_id = $1 AND action = 'OFFER'`, held).Scan(&cmdID, &gen); err != nil {
		t.Fatalf("the offer's command: %v", err)
	}
	if _, err := e.st.RecordResult(ctx, "alpha", store.CommandResult{CommandID: cmdID, DeviceID: held, Generation: gen, Error: "trait API down",
		FailureClass: store.FailurePermanent, FailureReason: "TraitUpdateFailed"}); err != nil {
		t.Fatal(err)
	}
	page := do(t, h, "GET", "/commands?state=FAILED", "ops-write", "", nil, nil).Body.String()
	if !strings.Contains(page, `action="/commands/`+cmdID+`/retry"`) {
		t.Fatalf("the failed command has no Retry: %s", page)
	}
	if w := do(t, h, "POST", "/commands/"+cmdID+"/retry", "ops-write", "", url.Values{"reason": {"API back"}}, nil); w.Code != http.StatusSeeOther {
		t.Fatalf("retry: %d %s", w.Code, w.Body.String())
	}
	if n := commandCount(t, e, held); n != 2 {
		t.Fatalf("after the retry the device has %d commands, want 2", n)
	}
}

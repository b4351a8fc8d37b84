package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ironlink/ironlink/hub/store"
)

// TestHandoffsCloseAndReplayInput: a repair handoff is listed on /handoffs
// and closed from it with a note (recorded with the operator's client id);
// a reader's close is 403 and an empty note 400 with the API's message,
// each changing nothing; closing it again is 409. The replay page refuses
// a malformed period and a broken candidate policy with the API's words.
func TestHandoffsCloseAndReplayInput(t *testing.T) {
	e := newEnv(t)
	h := consoleServer(t, e)
	ctx := context.Background()
	dev := e.ids["alpha"][0] // a-faulted-1
	ho, ok, err := e.st.CreateHandoff(ctx, store.NewHandoff{Device: store.RemediationDevice{DeviceID: dev, Site: "alpha", Rule: "gpu-fatal", HoldGeneration: 1},
		Reason: store.HandoffLadderExhausted, Detail: "2 steps tried, still faulted"})
	if err != nil || !ok {
		t.Fatalf("create handoff: %v %v", ok, err)
	}
	list := do(t, h, "GET", "/handoffs?site=alpha&open=1", "ops-write", "", nil, nil)
	row := fmt.Sprintf(`data-id="%d" data-state="OPEN"`, ho.ID)
	if list.Code != http.StatusOK || !strings.Contains(list.Body.String(), row) || !strings.Contains(list.Body.String(), "a-faulted-1") ||
		!strings.Contains(list.Body.String(), fmt.Sprintf(`action="/handoffs/%d/close"`, ho.ID)) {
		t.Fatalf("/handoffs: %d %.1500s", list.Code, list.Body.String())
	}
	closePath := fmt.Sprintf("/handoffs/%d/close", ho.ID)
	state := func() string {
		got, err := e.st.GetHandoff(ctx, ho.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.State + " " + got.ClosedBy + " " + got.CloseNote
	}
	if w := do(t, h, "POST", closePath, "ops-read", "", url.Values{"note": {"x"}}, nil); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "close repair handoffs") {
		t.Errorf("reader's close: %d %.300s", w.Code, w.Body.String())
	}
	if w := do(t, h, "POST", closePath, "ops-write", "", url.Values{"note": {""}}, nil); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "note") {
		t.Errorf("close without a note: %d %.300s", w.Code, w.Body.String())
	}
	if got := state(); !strings.HasPrefix(got, "OPEN") {
		t.Fatalf("refused closes changed the handoff: %s", got)
	}
	if w := do(t, h, "POST", closePath, "ops-write", "", url.Values{"note": {"PSU replaced"}, "back": {"/handoffs?site=alpha"}}, nil); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/handoffs?site=alpha" {
		t.Fatalf("close: %d %q %.300s", w.Code, w.Header().Get("Location"), w.Body.String())
	}
	if got := state(); got != "CLOSED ops-write PSU replaced" {
		t.Errorf("after close: %q", got)
	}
	if w := do(t, h, "POST", closePath, "ops-write", "", url.Values{"note": {"again"}}, nil); w.Code != http.StatusConflict {
		t.Errorf("second close: %d %.300s", w.Code, w.Body.String())
	}
	if w := do(t, h, "POST", "/handoffs/x1/close", "ops-write", "", url.Values{"note": {"n"}}, nil); w.Code != http.StatusBadRequest {
		t.Errorf("close of a malformed id: %d", w.Code)
	}
	list = do(t, h, "GET", "/handoffs?open=1", "ops-read", "", nil, nil)
	if strings.Contains(list.Body.String(), fmt.Sprintf(`data-id="%d"`, ho.ID)) || strings.Contains(list.Body.String(), "close-handoff") {
		t.Errorf("open-only list still shows the closed handoff, or a reader gets Close")
	}

	for _, tc := range []struct {
		form url.Values
		code int
		want string
	}{
		{url.Values{"from": {"last week"}}, http.StatusBadRequest, `from &#34;last week&#34; is neither a time`},
		{url.Values{"from": {"24h"}, "to": {"soon"}}, http.StatusBadRequest, `to &#34;soon&#34; is neither`},
		{url.Values{"from": {"24h"}, "policy_yaml": {"policy: [unclosed"}}, http.StatusBadRequest, "policy_yaml: "},
		{url.Values{"from": {"24h"}, "to": {"48h"}}, http.StatusBadRequest, "to_time must be after from_time"},
		{url.Values{"from": {"24h"}, "site": {"alpha"}}, http.StatusOK, `id="replay-summary"`},
	} {
		w := do(t, h, "POST", "/policy/replay", "ops-read", "", tc.form, nil)
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("replay %v: %d, want %d with %q: %.600s", tc.form, w.Code, tc.code, tc.want, w.Body.String())
		}
	}
}

// TestListShowsWhoQuarantinedAndWhy: the device list's quarantine column
// names each hold's holder, actor and reason (issue 25: the list showed
// only QuarantinedByHub).
func TestListShowsWhoQuarantinedAndWhy(t *testing.T) {
	e := newEnv(t)
	h := consoleServer(t, e)
	dev := e.ids["alpha"][3] // a-avail-1
	if w := do(t, h, "POST", "/devices/"+dev+"/quarantine", "ops-write", "", url.Values{"reason": {"PDU swap in rack 4"}}, nil); w.Code != http.StatusSeeOther {
		t.Fatalf("quarantine: %d %.300s", w.Code, w.Body.String())
	}
	w := do(t, h, "GET", "/devices?site=alpha", "ops-read", "", nil, nil)
	body := w.Body.String()
	i := strings.Index(body, `data-id="`+dev+`"`)
	if w.Code != http.StatusOK || i < 0 {
		t.Fatalf("list: %d, row of a-avail-1 missing", w.Code)
	}
	row := body[i:]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, `<div class="holder small">operator (ops-write): PDU swap in rack 4</div>`) {
		t.Errorf("a-avail-1's row does not say who quarantined it and why: %s", row)
	}
	if strings.Count(body, `class="holder small"`) != 1 {
		t.Errorf("the list shows %d holders, want 1 (only a-avail-1 is quarantined)", strings.Count(body, `class="holder small"`))
	}
}

package web

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/ironlink/ironlink/hub/store"
)

// TestReleaseSaysWhichHoldRemains: a device held by a policy rule and an
// operator; the operator's release through the web form (a plain POST
// and a fetch) shows the release call's outcome naming the hold that
// remains, the device page's decisions and commands tables have a row
// each, and the commands page names the device instead of a short id.
func TestReleaseSaysWhichHoldRemains(t *testing.T) {
	e := newEnv(t)
	h := consoleServer(t, e)
	ctx := context.Background()
	dev := e.ids["alpha"][6] // a-svc
	// The policy's decision quarantines the device under its rule's hold.
	if d, _, err := e.st.RecordPolicyDecision(ctx, store.PolicyDecision{DeviceID: dev, Site: "alpha", Kind: store.DecisionKindQuarantine,
		Action: "QUARANTINE", Reason: "RuleMatched", Detail: "XID 79 on GPU 3", Rule: "gpu-xid", From: "IN_SERVICE", To: "FAULTED"}); err != nil || d.CommandID == "" {
		t.Fatalf("policy decision: %+v %v", d, err)
	}
	if w := do(t, h, "POST", "/devices/"+dev+"/quarantine", "ops-write", "", url.Values{"reason": {"checking the GPU"}}, nil); w.Code != http.StatusSeeOther {
		t.Fatalf("operator quarantine: %d %s", w.Code, w.Body.String())
	}

	// The device page: a decision row and command rows.
	page := do(t, h, "GET", "/devices/"+dev, "ops-read", "", nil, nil).Body.String()
	decisions := section(t, page, `id="device-decisions"`)
	if !strings.Contains(decisions, `data-action="POLICY_ACTION_QUARANTINE"`) || !strings.Contains(decisions, "gpu-xid") || !strings.Contains(decisions, "a-svc") {
		t.Errorf("the decisions table has no row for the policy's decision:\n%s", decisions)
	}
	commands := section(t, page, `id="commands"`)
	if n := strings.Count(commands, "<tr data-command="); n != 2 || !strings.Contains(commands, "ops-write") || !strings.Contains(commands, "policy") {
		t.Errorf("the commands table has %d rows, want 2 (the policy's and the operator's quarantine):\n%s", n, commands)
	}

	// A plain form POST: redirected to the device page, which says what
	// the release did and which hold remains.
	w := do(t, h, "POST", "/devices/"+dev+"/release", "ops-write", "", url.Values{"reason": {"GPU fine"}}, nil)
	loc := w.Header().Get("Location")
	if w.Code != http.StatusSeeOther || !strings.Contains(loc, "release=STILL_HELD") || !strings.Contains(loc, "command=") {
		t.Fatalf("release: %d, Location %q", w.Code, loc)
	}
	page = do(t, h, "GET", loc, "ops-write", "", nil, nil).Body.String()
	result := section(t, page, `id="release-result"`)
	if !strings.Contains(result, `data-outcome="RELEASE_OUTCOME_STILL_HELD"`) || !strings.Contains(result, "stays quarantined") ||
		!strings.Contains(result, "still quarantined, held by policy:gpu-xid") {
		t.Errorf("the page after the release does not name the remaining hold:\n%s", result)
	}
	// The operator's hold is gone, the policy's remains.
	if hs, err := e.st.Holds(ctx, []string{dev}); err != nil || len(hs[dev]) != 1 || hs[dev][0].Holder != store.PolicyHolder("gpu-xid") {
		t.Fatalf("holds after the release: %+v %v", hs, err)
	}

	// Released again (by a fetch): only the policy holds it now; the
	// refusal names the hold.
	w = do(t, h, "POST", "/devices/"+dev+"/release", "ops-write", "", url.Values{"reason": {"again"}}, map[string]string{FragmentHeader: "1"})
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "held only by policy:gpu-xid") {
		t.Fatalf("fragment release held by others: %d %s", w.Code, w.Body.String())
	}
	// Every hold at once: released, and the result says so with no hold left.
	w = do(t, h, "POST", "/devices/"+dev+"/release", "ops-write", "", url.Values{"reason": {"all"}, "all_holds": {"on"}}, map[string]string{FragmentHeader: "1"})
	if body := w.Body.String(); w.Code != http.StatusOK || !strings.Contains(body, "released: policy:gpu-xid") || strings.Contains(body, "still quarantined") ||
		!strings.Contains(body, `id="command"`) {
		t.Fatalf("fragment release of every hold: %d %s", w.Code, body)
	}

	// A link's ?release= is believed only where the device agrees: with
	// no hold left, "still held" is not shown, nor "restored" without this
	// device's release command.
	for _, q := range []string{"?release=STILL_HELD", "?release=RESTORED_OFFERED", "?release=HELD_BY_OTHERS&command=" + dev} {
		if p := do(t, h, "GET", "/devices/"+dev+q, "ops-write", "", nil, nil).Body.String(); strings.Contains(p, `id="release-result"`) {
			t.Errorf("GET /devices/%s%s shows a release outcome the device contradicts:\n%s", dev, q, section(t, p, `id="release-result"`))
		}
	}
	if p := do(t, h, "GET", "/devices/"+dev+"?release=NOT_QUARANTINED", "ops-write", "", nil, nil).Body.String(); !strings.Contains(p, `data-outcome="RELEASE_OUTCOME_NOT_QUARANTINED"`) {
		t.Errorf("GET /devices/%s?release=NOT_QUARANTINED of a device with no hold does not say so", dev)
	}

	// The commands page names the device, not an 8-character id.
	cp := section(t, do(t, h, "GET", "/commands?device="+dev, "ops-read", "", nil, nil).Body.String(), `id="commands"`)
	if !regexp.MustCompile(`<a href="/devices/` + dev + `\?command=[0-9a-f-]{36}" class="device-name" title="` + dev + `">a-svc</a>`).MatchString(cp) {
		t.Errorf("the commands page's device column does not name a-svc:\n%s", cp)
	}
}

// section is page from the element whose attribute marker is, to its
// table's or paragraph's end.
func section(t *testing.T, page, marker string) string {
	t.Helper()
	i := strings.Index(page, marker)
	if i < 0 {
		t.Fatalf("the page has no %s:\n%.2000s", marker, page)
	}
	rest := page[i:]
	end := len(rest)
	for _, closer := range []string{"</table>", "</p>"} {
		if j := strings.Index(rest, closer); j >= 0 && j < end {
			end = j
		}
	}
	return rest[:end]
}

package web

import (
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/syncbuf"
)

// TestSiteBoundOperatorInTheFleetView (issue 9 item 8): an operator whose
// roster entry lists only site alpha sees only alpha in the fleet view (the
// matrix, the device list and its site filter), and beta's devices, their
// quarantine and a beta site filter are 403, write nothing and are logged as
// the API's refusals are. Before the fix the view dropped the roster's sites:
// the operator saw beta and could quarantine its devices.
func TestSiteBoundOperatorInTheFleetView(t *testing.T) {
	e := newEnv(t)
	k, err := auth.GenerateKey(auth.AlgES256)
	if err != nil {
		t.Fatal(err)
	}
	kid, err := auth.Thumbprint(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	entry, err := auth.FormatRosterEntry("ops-alpha", "", []string{auth.ScopeOperationsRead, auth.ScopeOperationsWrite}, kid, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	entry = strings.Replace(entry, "    scopes:", "    sites: [alpha]\n    scopes:", 1)
	path := filepath.Join(t.TempDir(), "roster.yaml")
	if err := os.WriteFile(path, []byte("satellites: []\noperators:\n"+entry), 0o644); err != nil {
		t.Fatal(err)
	}
	if e.roster, err = auth.LoadRoster(path); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	s, err := New(proxyCfg, e.fleet, e.st, func() *auth.Roster { return e.roster }, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	betaNames := []string{"b-onb", "b-val", "b-alloc", "b-faulted"}
	noBeta := func(what, body string) {
		t.Helper()
		if strings.Contains(body, "beta") {
			t.Errorf("%s shows site beta", what)
		}
		for _, n := range betaNames {
			if strings.Contains(body, n) {
				t.Errorf("%s shows beta's device %s", what, n)
			}
		}
	}

	w := do(t, h, "GET", "/", "ops-alpha", "", nil, nil)
	if w.Code != 200 || !strings.Contains(w.Body.String(), "alpha") {
		t.Fatalf("overview: %d", w.Code)
	}
	noBeta("the overview", w.Body.String())
	w = do(t, h, "GET", "/devices", "ops-alpha", "", nil, nil)
	if w.Code != 200 || !strings.Contains(w.Body.String(), "a-avail-1") {
		t.Fatalf("device list: %d", w.Code)
	}
	noBeta("the device list", w.Body.String())
	w = do(t, h, "GET", "/devices?q=b-", "ops-alpha", "", nil, nil)
	noBeta("a name search", w.Body.String())

	beta := e.ids["beta"][0]
	form := url.Values{"reason": {"not mine"}}
	for _, tc := range []struct{ name, method, path string }{
		{"beta's site filter", "GET", "/devices?site=beta"},
		{"beta's device page", "GET", "/devices/" + beta},
		{"quarantine of beta's device", "POST", "/devices/" + beta + "/quarantine"},
		{"release of beta's device", "POST", "/devices/" + beta + "/release"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f url.Values
			if tc.method == "POST" {
				f = form
			}
			w := do(t, h, tc.method, tc.path, "ops-alpha", "", f, nil)
			if w.Code != 403 {
				t.Fatalf("%s %s: %d, want 403", tc.method, tc.path, w.Code)
			}
			if c, hst := commandRows(t, e, beta); c != 0 || hst != 0 {
				t.Fatalf("refused %s wrote %d commands, %d history rows", tc.name, c, hst)
			}
		})
	}
	if !strings.Contains(logs.String(), "permission denied: site not among the operator's sites") || !strings.Contains(logs.String(), "client_id=ops-alpha") {
		t.Errorf("refusals not logged:\n%s", logs.String())
	}
	// Its own site still works, writes included.
	a := e.ids["alpha"][3]
	if w := do(t, h, "GET", "/devices/"+a, "ops-alpha", "", nil, nil); w.Code != 200 {
		t.Fatalf("alpha's device page: %d", w.Code)
	}
	if w := do(t, h, "POST", "/devices/"+a+"/quarantine", "ops-alpha", "", form, map[string]string{FragmentHeader: "1"}); w.Code != 200 {
		t.Fatalf("quarantine of alpha's device: %d %s", w.Code, w.Body.String())
	}
	if c, _ := commandRows(t, e, a); c != 1 {
		t.Fatalf("alpha's quarantine wrote %d commands, want 1", c)
	}
}

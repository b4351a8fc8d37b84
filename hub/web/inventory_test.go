package web

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/ctl"
)

// TestInventoryCoversEveryRPC walks the proto registry: every RPC of every
// operator service (all of ironlink.v1 but ctl.NonOperatorServices, the
// services the CLI does not call either) must have a route of the view in
// Inventory, every route named there must be registered, and
// docs/reference/web.md must carry the table InventoryMarkdown renders.
// Then every GET route answers 200 to a read-only operator on a hub with
// operations, the policy API and the remediation API wired as hub/app
// wires them (a route whose handler is missing or broken fails here),
// and every POST route refuses a cross-site request and, but the replay,
// an operator without operations:write, writing nothing.
func TestInventoryCoversEveryRPC(t *testing.T) {
	var rpcs []string
	protoregistry.GlobalFiles.RangeFilesByPackage("ironlink.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Services().Len(); i++ {
			sd := fd.Services().Get(i)
			if _, skip := ctl.NonOperatorServices[string(sd.Name())]; skip {
				continue
			}
			for j := 0; j < sd.Methods().Len(); j++ {
				rpcs = append(rpcs, string(sd.Name())+"/"+string(sd.Methods().Get(j).Name()))
			}
		}
		return true
	})
	if len(rpcs) < 30 {
		t.Fatalf("found only %d operator RPCs: %v", len(rpcs), rpcs)
	}
	e := newEnv(t)
	s := consoleView(t, e)
	h := s.Handler()
	byRPC := map[string]InventoryEntry{}
	for _, en := range Inventory {
		if _, dup := byRPC[en.RPC]; dup {
			t.Errorf("Inventory lists %s twice", en.RPC)
		}
		byRPC[en.RPC] = en
		if !slices.Contains(rpcs, en.RPC) {
			t.Errorf("Inventory lists %s, which is not an RPC of an operator service", en.RPC)
		}
		for _, r := range en.Routes {
			if !slices.Contains(s.patterns, r) {
				t.Errorf("%s: route %q is not registered", en.RPC, r)
			}
		}
	}
	for _, r := range rpcs {
		if len(byRPC[r].Routes) == 0 {
			t.Errorf("RPC %s has no page in the fleet view: add one and list it in web.Inventory", r)
		}
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "reference", "web.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), InventoryMarkdown()) {
		t.Errorf("docs/reference/web.md lacks the inventory table; put this in it:\n%s", InventoryMarkdown())
	}

	// Every GET route, with its path filled in, answers 200.
	ctx := context.Background()
	dev := e.ids["alpha"][6] // a-svc
	w := do(t, h, "POST", "/devices/"+dev+"/action", "ops-write", "", url.Values{"action": {"reboot"}, "reason": {"hung GPU"}, "force": {"on"}}, nil)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("reboot: %d %s", w.Code, w.Body.String())
	}
	ops, err := e.st.RecentOperations(ctx, dev, 1)
	if err != nil || len(ops) != 1 {
		t.Fatalf("operations: %v %v", ops, err)
	}
	w = do(t, h, "POST", "/devices/"+dev+"/quarantine", "ops-write", "", url.Values{"reason": {"x"}}, nil)
	loc, _ := url.Parse(w.Header().Get("Location"))
	cmd := loc.Query().Get("command")
	if w.Code != http.StatusSeeOther || cmd == "" {
		t.Fatalf("quarantine: %d %q", w.Code, w.Header().Get("Location"))
	}
	fill := strings.NewReplacer("{$}", "", "{id}", dev, "{site}", "alpha", "{name}", "a-svc")
	paths := map[string]string{"GET /operations/{id}": "/operations/" + ops[0].ID, "GET /commands/{id}": "/commands/" + cmd,
		"GET /validation": "/validation?site=alpha", "GET /hardware": "/hardware?device=a-svc", "GET /events": "/events?device=a-svc&since=1h",
		"GET /policy/replay": "/policy/replay?from=24h", "GET /sites/{name}": "/sites/alpha"}
	for _, p := range s.patterns {
		method, path, _ := strings.Cut(p, " ")
		if method != "GET" {
			continue
		}
		if q, ok := paths[p]; ok {
			path = q
		} else {
			path = fill.Replace(path)
		}
		w := do(t, h, "GET", path, "ops-read", "", nil, nil)
		if w.Code != http.StatusOK && w.Code != http.StatusFound {
			t.Errorf("GET %s (%s): %d %.300s", path, p, w.Code, w.Body.String())
		}
	}
	// Every POST route refuses a cross-site request (the CSRF protection)
	// and, but the replay (which writes nothing), a reader, saying why.
	cmds := commandCount(t, e, dev)
	for _, p := range s.patterns {
		method, path, _ := strings.Cut(p, " ")
		if method != "POST" {
			continue
		}
		path = strings.NewReplacer("{id}", dev, "{verb}", "approve").Replace(path)
		form := url.Values{"reason": {"x"}, "note": {"x"}, "from": {"1h"}, "device": {dev}, "kind": {"exclusion"}, "verb": {"release"}, "expected_count": {"1"}}
		if w := do(t, h, "POST", path, "ops-write", "", form, map[string]string{"Sec-Fetch-Site": "cross-site"}); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "cross-origin") {
			t.Errorf("cross-site POST %s: %d %.200s", path, w.Code, w.Body.String())
		}
		if p == "POST /policy/replay" {
			continue
		}
		if w := do(t, h, "POST", path, "ops-read", "", form, nil); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "lacks the operations:write scope") {
			t.Errorf("reader's POST %s: %d %.200s", path, w.Code, w.Body.String())
		}
	}
	if n := commandCount(t, e, dev); n != cmds {
		t.Errorf("refused POSTs wrote %d commands", n-cmds)
	}

	// The events page shows the quarantine's command and the reboot.
	w = do(t, h, "GET", "/events?device=alpha/a-svc&since=1h", "ops-read", "", nil, nil)
	for _, want := range []string{`data-kind="command state"`, "quarantine", `data-kind="operation state"`, "REBOOT"} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("/events of a-svc lacks %q: %.2000s", want, w.Body.String())
		}
	}
	if w := do(t, h, "GET", "/events?device=a-avail-1&since=1h", "ops-read", "", nil, nil); strings.Contains(w.Body.String(), `data-kind="command state"`) {
		t.Errorf("/events of a-avail-1 shows another device's command")
	}
}

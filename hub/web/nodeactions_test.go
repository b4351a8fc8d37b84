package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/testlog"
)

// TestNodeActions: the device page offers the node actions to an
// operations:write identity of a hub with operations, not to a read-only
// one (whose POST is 403 and writes nothing); a node action starts an
// operation with the form's reason, soft and force, and a refusal of the
// hub's (CUSTOMER_INSTANCE) is shown with its message.
func TestNodeActions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.st.OpenLink(ctx, store.LinkHello{Site: "alpha", BootID: uuid.NewString(), Replica: "r0", Capabilities: []string{operations.Capability}}); err != nil {
		t.Fatal(err)
	}
	srv := e.server(t, proxyCfg)
	srv.SetOperations(operations.NewServer(e.st, operations.Config{Actor: actor}, testlog.New(t)))
	h := srv.Handler()
	dev := e.ids["alpha"][3]
	if w := do(t, h, "GET", "/devices/"+dev, "ops-read", "", nil, nil); strings.Contains(w.Body.String(), "node-action-form") {
		t.Fatal("a read-only identity is offered node actions")
	}
	if w := do(t, h, "GET", "/devices/"+dev, "ops-write", "", nil, nil); !strings.Contains(w.Body.String(), "node-action-form") {
		t.Fatal("a writer is offered no node actions")
	}
	if w := do(t, h, "POST", "/devices/"+dev+"/action", "ops-read", "", url.Values{"action": {"reboot"}, "reason": {"x"}}, nil); w.Code != http.StatusForbidden {
		t.Fatalf("read-only POST: %d %s", w.Code, w.Body.String())
	}
	if w := do(t, h, "POST", "/devices/"+dev+"/action", "ops-write", "", url.Values{"action": {"explode"}, "reason": {"x"}}, nil); w.Code != http.StatusBadRequest {
		t.Fatalf("unknown action: %d %s", w.Code, w.Body.String())
	}
	// a-svc is IN_SERVICE: CustomerAllocated=True.
	svc := e.ids["alpha"][6]
	w := do(t, h, "POST", "/devices/"+svc+"/action", "ops-write", "", url.Values{"action": {"reboot"}, "reason": {"x"}}, nil)
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "would interrupt it") {
		t.Fatalf("reboot of a customer's device without force: %d %s", w.Code, w.Body.String())
	}
	if ops, err := e.st.RecentOperations(ctx, svc, 5); err != nil || len(ops) != 0 {
		t.Fatalf("a refused node action stored %v %v", ops, err)
	}
	dev = svc
	w = do(t, h, "POST", "/devices/"+dev+"/action", "ops-write", "", url.Values{"action": {"reboot"}, "reason": {"hung GPU"}, "soft": {"on"}, "force": {"on"}}, nil)
	if w.Code != http.StatusSeeOther || !strings.Contains(w.Header().Get("Location"), "?operation=") {
		t.Fatalf("reboot: %d Location %q %s", w.Code, w.Header().Get("Location"), w.Body.String())
	}
	ops, err := e.st.RecentOperations(ctx, dev, 5)
	if err != nil || len(ops) != 1 || ops[0].Kind != "REBOOT" || ops[0].Actor != "ops-write" || ops[0].Reason != "hung GPU" || !ops[0].Forced || !strings.Contains(strings.ReplaceAll(string(ops[0].Params), " ", ""), `"soft":true`) {
		t.Fatalf("operations after the reboot: %+v %v", ops, err)
	}
	if page := do(t, h, "GET", w.Header().Get("Location"), "ops-write", "", nil, nil); !strings.Contains(page.Body.String(), "op-"+ops[0].ID) {
		t.Fatalf("the device page does not list the reboot")
	}
}

package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/devsel"
	"github.com/ironlink/ironlink/internal/textcheck"
	"github.com/ironlink/ironlink/internal/wire"
)

// The operations pages (docs/reference/web.md "Operations"): the list with
// OperationService's filters, one page per operation with its steps and
// timings, and for operations:write start and cancel, all through the
// RPCs' own handlers.

// startKinds are the kinds the start form offers (ENROL and CLEAN take
// node specs and clean steps: `ironlink op start`).
var startKinds = []ironlinkv1.OperationKind{
	ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE,
	ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY, ironlinkv1.OperationKind_OPERATION_KIND_UNDEPLOY,
	ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE,
	ironlinkv1.OperationKind_OPERATION_KIND_POWER_ON, ironlinkv1.OperationKind_OPERATION_KIND_POWER_OFF,
	ironlinkv1.OperationKind_OPERATION_KIND_REBOOT, ironlinkv1.OperationKind_OPERATION_KIND_SET_MAINTENANCE,
	ironlinkv1.OperationKind_OPERATION_KIND_CLEAR_MAINTENANCE, ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION,
	ironlinkv1.OperationKind_OPERATION_KIND_HARDWARE_REREAD,
}

type operationsData struct {
	Ops       []*ironlinkv1.Operation
	Filter    url.Values
	Kinds     []option
	States    []option
	StartKind []option
	NextHref  string
	CanWrite  bool
	// Selector prefills the start form (?selector=, with ?start_kind=
	// choosing its kind): the drift page's outlier links.
	Selector string
}

// parseOpKind reads a kind name (REBOOT, reboot, set-maintenance).
func parseOpKind(field, v string) (ironlinkv1.OperationKind, error) {
	n := strings.ReplaceAll(strings.ToUpper(strings.TrimSpace(v)), "-", "_")
	k, ok := ironlinkv1.OperationKind_value["OPERATION_KIND_"+n]
	if !ok || k == 0 {
		return 0, badInput(field, fmt.Errorf("%s %q is not an operation kind (INSPECT, PROVIDE, REBOOT, ...)", field, v))
	}
	return ironlinkv1.OperationKind(k), nil
}

func parseOpState(v string) (ironlinkv1.OperationState, error) {
	s, ok := ironlinkv1.OperationState_value["OPERATION_STATE_"+strings.ToUpper(strings.TrimSpace(v))]
	if !ok || s == 0 {
		return 0, badInput("state", fmt.Errorf("state %q is not an operation state (PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED)", v))
	}
	return ironlinkv1.OperationState(s), nil
}

// operations handles GET /operations: ?site, ?device, ?kind, ?state
// (repeatable), ?group, ?page (the API's page token).
func (s *Server) operations(w http.ResponseWriter, r *http.Request, id Identity) {
	if !s.needOps(w, r) {
		return
	}
	q := r.URL.Query()
	req := &ironlinkv1.ListOperationsRequest{Site: q.Get("site"), Device: q.Get("device"), GroupId: q.Get("group"), PageSize: 100, PageToken: q.Get("page")}
	for _, v := range q["kind"] {
		if v == "" {
			continue
		}
		k, err := parseOpKind("kind", v)
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		req.Kinds = append(req.Kinds, k)
	}
	for _, v := range q["state"] {
		if v == "" {
			continue
		}
		st, err := parseOpState(v)
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		req.States = append(req.States, st)
	}
	resp, err := s.ops.ListOperations(apiContext(r.Context(), id), req)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	d := operationsData{Ops: resp.GetOperations(), Filter: q, CanWrite: id.CanWrite()}
	for k := ironlinkv1.OperationKind(1); int(k) < len(ironlinkv1.OperationKind_name); k++ {
		n := wire.EnumName(k, "OPERATION_KIND_")
		d.Kinds = append(d.Kinds, option{Value: n, Label: n, Selected: hasValue(q["kind"], n)})
	}
	for st := ironlinkv1.OperationState(1); int(st) < len(ironlinkv1.OperationState_name); st++ {
		n := wire.EnumName(st, "OPERATION_STATE_")
		d.States = append(d.States, option{Value: n, Label: n, Selected: hasValue(q["state"], n)})
	}
	d.Selector = q.Get("selector")
	startKind := strings.ReplaceAll(strings.ToUpper(q.Get("start_kind")), "-", "_")
	for _, k := range startKinds {
		n := wire.EnumName(k, "OPERATION_KIND_")
		d.StartKind = append(d.StartKind, option{Value: n, Label: strings.ToLower(strings.ReplaceAll(n, "_", " ")), Selected: n == startKind})
	}
	if t := resp.GetNextPageToken(); t != "" {
		next := url.Values{}
		for k, vs := range q {
			next[k] = vs
		}
		next.Set("page", t)
		d.NextHref = "/operations?" + next.Encode()
	}
	s.render(w, r, http.StatusOK, "operations", "Operations", d)
}

func hasValue(vs []string, v string) bool {
	for _, x := range vs {
		if strings.EqualFold(x, v) {
			return true
		}
	}
	return false
}

type operationData struct {
	Op       *ironlinkv1.Operation
	CanWrite bool
	Final    bool
}

// operation handles GET /operations/{id}.
func (s *Server) operation(w http.ResponseWriter, r *http.Request, id Identity) {
	if !s.needOps(w, r) {
		return
	}
	var op *ironlinkv1.Operation
	if isFragment(r) {
		var err error
		if op, err = s.watchOperation(r.Context(), id, r.PathValue("id")); err != nil {
			s.apiFail(w, r, err)
			return
		}
	} else {
		resp, err := s.ops.GetOperation(apiContext(r.Context(), id), &ironlinkv1.GetOperationRequest{OperationId: r.PathValue("id")})
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		op = resp.GetOperation()
	}
	s.render(w, r, http.StatusOK, "operation", "Operation "+wire.EnumName(op.GetKind(), "OPERATION_KIND_"),
		operationData{Op: op, CanWrite: id.CanWrite(), Final: operationFinal(op)})
}

// watchOperation is the operation page's live region: WatchOperation in
// this process, the operation now and, when it is not final, its next
// change if one comes within the page's refresh interval (so a change
// shows as soon as it is stored, and a refresh never outlives the next).
func (s *Server) watchOperation(ctx context.Context, id Identity, opID string) (*ironlinkv1.Operation, error) {
	ctx, cancel := context.WithTimeout(apiContext(ctx, id), max(s.cfg.Refresh, time.Second))
	defer cancel()
	var last *ironlinkv1.Operation
	err := s.ops.WatchOperation(&ironlinkv1.WatchOperationRequest{OperationId: opID}, &callStream[ironlinkv1.WatchOperationResponse]{ctx: ctx,
		send: func(m *ironlinkv1.WatchOperationResponse) error {
			first := last == nil
			last = m.GetOperation()
			if first && !operationFinal(last) {
				return nil // wait for the next change
			}
			cancel()
			return context.Canceled
		}})
	if last != nil {
		return last, nil // the stream ended by the view (a change, or the wait is over)
	}
	return nil, err
}

func operationFinal(o *ironlinkv1.Operation) bool {
	st := o.GetState()
	return st != ironlinkv1.OperationState_OPERATION_STATE_PENDING && st != ironlinkv1.OperationState_OPERATION_STATE_RUNNING
}

// cancelOperation handles POST /operations/{id}/cancel (form: reason).
func (s *Server) cancelOperation(w http.ResponseWriter, r *http.Request, id Identity) {
	if !s.needOps(w, r) || !s.writeForm(w, r, id, "cancel operations") {
		return
	}
	resp, err := s.ops.CancelOperation(apiContext(r.Context(), id), &ironlinkv1.CancelOperationRequest{OperationId: r.PathValue("id"), Reason: r.PostForm.Get("reason")})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	s.log.Info("fleet view: operation cancel requested", "client_id", id.ClientID, "operation_id", resp.GetOperation().GetOperationId(), "via", id.Via)
	http.Redirect(w, r, "/operations/"+url.PathEscape(resp.GetOperation().GetOperationId()), http.StatusSeeOther)
}

// selectorTargets resolves a selector (the --selector syntax, e.g. a drift
// outlier group's) to device ids through BulkService's preview, as
// `ironlink op start -l` does: no device, or more than the preview lists,
// is InvalidArgument on selector.
func (s *Server) selectorTargets(ctx context.Context, raw string) ([]string, error) {
	sel, err := devsel.Parse(raw, "selector")
	if err != nil {
		return nil, badInput("selector", err)
	}
	resp, err := s.fleet.Bulk().PreviewBulkImpairment(ctx, &ironlinkv1.PreviewBulkImpairmentRequest{Selector: sel})
	if err != nil {
		return nil, err
	}
	switch {
	case resp.GetCount() == 0:
		return nil, badInput("selector", fmt.Errorf("selector %s matches no device", textcheck.Quote(raw)))
	case int(resp.GetCount()) > len(resp.GetDevices()):
		return nil, badInput("selector", fmt.Errorf("selector %s matches %d devices; at most %d at a time: narrow it", textcheck.Quote(raw), resp.GetCount(), len(resp.GetDevices())))
	}
	out := make([]string, 0, len(resp.GetDevices()))
	for _, d := range resp.GetDevices() {
		out = append(out, d.GetDeviceId())
	}
	return out, nil
}

// startOperation handles POST /operations: kind, devices (names,
// SITE/NAME or UUIDs, separated by commas, spaces or lines) or a selector
// (every device it matches, see selectorTargets), reason,
// force, soft, image (DEPLOY's image_source, NOVA_CREATE's image),
// checksum (DEPLOY), flavor and server name (NOVA_CREATE); the
// maintenance reason is the reason.
func (s *Server) startOperation(w http.ResponseWriter, r *http.Request, id Identity) {
	if !s.needOps(w, r) || !s.writeForm(w, r, id, "start operations") {
		return
	}
	f := r.PostForm
	kind, err := parseOpKind("kind", f.Get("kind"))
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	reason := f.Get("reason")
	p := &ironlinkv1.OperationParams{Soft: f.Get("soft") == "on"}
	switch kind {
	case ironlinkv1.OperationKind_OPERATION_KIND_SET_MAINTENANCE:
		p.MaintenanceReason = reason
	case ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY:
		p.Deploy = &ironlinkv1.DeployParams{ImageSource: f.Get("image"), ImageChecksum: f.Get("checksum")}
	case ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE:
		p.NovaCreate = &ironlinkv1.NovaCreateParams{Image: f.Get("image"), Flavor: f.Get("flavor"), Name: f.Get("server_name")}
	}
	devs := strings.FieldsFunc(f.Get("devices"), func(c rune) bool { return c == ',' || c == ' ' || c == '\n' || c == '\r' || c == '\t' })
	if sel := strings.TrimSpace(f.Get("selector")); sel != "" {
		if len(devs) > 0 {
			s.apiFail(w, r, badInput("selector", errors.New("give devices or a selector, not both")))
			return
		}
		if devs, err = s.selectorTargets(apiContext(r.Context(), id), sel); err != nil {
			s.apiFail(w, r, err)
			return
		}
	}
	resp, err := s.ops.StartOperation(apiContext(r.Context(), id), &ironlinkv1.StartOperationRequest{Kind: kind, Devices: devs,
		Reason: reason, Params: p, Force: f.Get("force") == "on"})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	s.log.Info("fleet view: operations requested", "client_id", id.ClientID, "kind", kind.String(), "group_id", resp.GetGroupId(),
		"operations", len(resp.GetOperations()), "via", id.Via)
	if ops := resp.GetOperations(); len(ops) == 1 {
		http.Redirect(w, r, "/operations/"+url.PathEscape(ops[0].GetOperationId()), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/operations?group="+url.QueryEscape(resp.GetGroupId()), http.StatusSeeOther)
}

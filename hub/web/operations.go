package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/internal/devsel"
	"github.com/ironlink/ironlink/internal/sitename"
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
	Ops       []opRow
	Filter    url.Values
	SelText   string
	Heads     []sortHead
	Kinds     []option
	States    []option
	StartKind []option
	NextHref  string
	CanWrite  bool
	// Selector prefills the start form (?start_selector=, with ?start_kind=
	// choosing its kind): the drift page's outlier links.
	Selector string
}

// opRow is one operation of the list, with the columns it shows.
type opRow struct {
	ID, Site, DeviceID, Name, Kind, State string
	CancelRequested, Forced               bool
	Created                               time.Time
	Ended                                 *time.Time
	Actor, Reason, LastError              string
}

// opColumns are the operation list's sort keys; name (the device's, or
// the node's for an enrolment) is the default, newest first within a name.
var opColumns = []listCol{
	{"created", "created", "o.created_at"}, {"kind", "kind", "o.kind"},
	{"name", "device", "coalesce(nullif(o.device_name, ''), o.node->>'name', '')"}, {"site", "site", "o.site"},
	{"state", "state", "o.state"}, {"took", "took", "coalesce(o.ended_at, now()) - o.created_at"}, {"actor", "actor", "o.actor"},
	{"reason", "reason", "o.reason"}, {"error", "error", "o.last_error"}, {"id", "id", "o.id"},
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

// operations handles GET /operations: ?site, ?device (name, SITE/NAME or
// id), ?selector (the CLI's syntax: the operations of the devices it
// selects), ?kind, ?state (repeatable), ?group, ?sort ([-]column; by
// device name, newest first within one, without it) and ?offset. The
// filters are OperationService.ListOperations'; the order is any column's,
// so the page reads the operations table itself (listOperations).
func (s *Server) operations(w http.ResponseWriter, r *http.Request, id Identity) {
	if !s.needOps(w, r) {
		return
	}
	q := r.URL.Query()
	ctx := apiContext(r.Context(), id)
	sel, hasSel, handled := s.deviceSelection(w, r, ctx, q, id)
	if handled {
		return
	}
	f := opListFilter{Sites: id.Sites}
	var err error
	if f.Site, err = s.listSite(ctx, q.Get("site")); err != nil {
		s.apiFail(w, r, err)
		return
	}
	for _, v := range q["kind"] {
		if v == "" {
			continue
		}
		k, err := parseOpKind("kind", v)
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		f.Kinds = append(f.Kinds, wire.EnumName(k, "OPERATION_KIND_"))
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
		f.States = append(f.States, wire.EnumName(st, "OPERATION_STATE_"))
	}
	if g := strings.TrimSpace(q.Get("group")); g != "" {
		u, err := uuid.Parse(g)
		if err != nil {
			s.apiFail(w, r, badInput("group", fmt.Errorf("group %q is not a UUID", g)))
			return
		}
		f.Group = u.String()
	}
	if dv := strings.TrimSpace(q.Get("device")); dv != "" {
		d, err := s.getDevice(ctx, dv, 1)
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		f.DeviceID = d.GetDevice().GetDeviceId()
	}
	if f.Order, err = parseListOrder(q.Get("sort"), opColumns, "name"); err != nil {
		s.apiFail(w, r, err)
		return
	}
	if f.Offset, err = parseOffset(q.Get("offset")); err != nil {
		s.apiFail(w, r, err)
		return
	}
	if hasSel {
		f.Sel = &sel
	}
	rows, more, err := listOperations(ctx, s.store.Pool(), f)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	d := operationsData{Ops: rows, Filter: q, SelText: sel.SelText, CanWrite: id.CanWrite(), Heads: f.Order.heads("/operations", q, opColumns, "name")}
	for k := ironlinkv1.OperationKind(1); int(k) < len(ironlinkv1.OperationKind_name); k++ {
		n := wire.EnumName(k, "OPERATION_KIND_")
		d.Kinds = append(d.Kinds, option{Value: n, Label: n, Selected: hasValue(q["kind"], n)})
	}
	for st := ironlinkv1.OperationState(1); int(st) < len(ironlinkv1.OperationState_name); st++ {
		n := wire.EnumName(st, "OPERATION_STATE_")
		d.States = append(d.States, option{Value: n, Label: n, Selected: hasValue(q["state"], n)})
	}
	d.Selector = q.Get("start_selector")
	startKind := strings.ReplaceAll(strings.ToUpper(q.Get("start_kind")), "-", "_")
	for _, k := range startKinds {
		n := wire.EnumName(k, "OPERATION_KIND_")
		d.StartKind = append(d.StartKind, option{Value: n, Label: strings.ToLower(strings.ReplaceAll(n, "_", " ")), Selected: n == startKind})
	}
	if more {
		d.NextHref = nextHref("/operations", q, f.Offset)
	}
	s.render(w, r, http.StatusOK, "operations", "Operations", d)
}

// listSite reads a list's ?site=: empty, or a valid site name the caller
// may see (the API's messages).
func (s *Server) listSite(ctx context.Context, v string) (string, error) {
	site := strings.TrimSpace(v)
	if site == "" {
		return "", nil
	}
	if !sitename.Valid(site) {
		return "", badInput("site", fmt.Errorf("site %q is not a valid site name", site))
	}
	if sc := authn.CallerScope(ctx); !sc.Allows(site) {
		return "", sc.Deny(ctx, s.log, "site "+site, site)
	}
	return site, nil
}

// opListFilter is the operation list's filter and order.
type opListFilter struct {
	Site     string
	Sites    []string // the caller's sites (nil: every site)
	DeviceID string
	Group    string
	Kinds    []string
	States   []string
	Sel      *listFilter // the selector's devices, when one is given
	Order    listOrder
	Offset   int
}

// listOperations reads one page of operations in f's order, and whether
// more follow: one statement.
func listOperations(ctx context.Context, pool *pgxpool.Pool, f opListFilter) ([]opRow, bool, error) {
	where, args := deviceRowsCond("o", f.Sel, f.Site, f.Sites, f.DeviceID)
	if f.Group != "" {
		where += " AND o.group_id = " + args.add(f.Group) + "::uuid"
	}
	if len(f.Kinds) > 0 {
		where += " AND o.kind = ANY(" + args.add(f.Kinds) + "::text[])"
	}
	if len(f.States) > 0 {
		where += " AND o.state = ANY(" + args.add(f.States) + "::text[])"
	}
	rows, err := pool.Query(ctx, `SELECT o.id::text, o.site, coalesce(o.device_id::text, ''),
		coalesce(nullif(o.device_name, ''), o.node->>'name', ''), o.kind, o.state, o.cancel_requested, o.forced,
		o.created_at, o.ended_at, o.actor, o.reason, o.last_error
		FROM operations o WHERE `+where+`
		ORDER BY `+f.Order.orderBy(opColumns, "o.created_at DESC, o.id DESC")+`
		OFFSET `+args.add(f.Offset)+` LIMIT `+args.add(listPageSize+1), args...)
	if err != nil {
		return nil, false, fmt.Errorf("list operations: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (opRow, error) {
		var o opRow
		err := r.Scan(&o.ID, &o.Site, &o.DeviceID, &o.Name, &o.Kind, &o.State, &o.CancelRequested, &o.Forced,
			&o.Created, &o.Ended, &o.Actor, &o.Reason, &o.LastError)
		return o, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("list operations: %w", err)
	}
	more := len(out) > listPageSize
	if more {
		out = out[:listPageSize]
	}
	return out, more, nil
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

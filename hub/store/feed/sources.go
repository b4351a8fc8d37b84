package feed

import (
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
)

// feedSource is one table the feed reads. Every query takes $1 the
// watermark, $2 and $3 the (xid, id) to read after, $4 the limit, $5 the
// site filter, $6 the sites allowed, $7 the statuses; it returns xid::text
// and id first, in (xid, id) order.
type feedSource struct {
	// no is the source's number in cursors; never change or reuse one.
	no    int
	kind  Kind
	query string
	scan  func(pgx.CollectableRow) (Event, error)
}

// page is the WHERE clause, order and limit of a source's query under the
// parameters feedSource names: rows of the table aliased t (with its dot,
// or "" for none) before the watermark and after the cursor, of the site
// column site filtered by $5 and $6, and statuses the condition on $7
// (anyStatus where the source has no status).
func page(t, site, statuses string) string {
	return fmt.Sprintf(`
		WHERE %[1]sxid < $1::text::xid8 AND (%[1]sxid, %[1]sid) > ($2::text::xid8, $3::bigint)
		  AND ($5 = '' OR %[2]s = $5) AND ($6::text[] IS NULL OR %[2]s = ANY($6::text[]))
		  AND %[3]s
		ORDER BY %[1]sxid, %[1]sid LIMIT $4`, t, site, statuses)
}

// anyStatus is page's statuses of a source without a status: $7 is
// ignored (but typed, so that every query takes the same parameters).
const anyStatus = "cardinality($7::text[]) >= 0"

var feedSources = []feedSource{
	{no: 1, kind: EventDeviceStatus, query: `
		SELECT h.xid::text, h.id, h.changed_at, h.device_id::text, d.site, d.name, h.status, h.reason, COALESCE(p.status, '')
		FROM status_history h
		JOIN devices d ON d.id = h.device_id
		LEFT JOIN LATERAL (SELECT status FROM status_history p
			WHERE p.device_id = h.device_id AND (p.changed_at, p.id) < (h.changed_at, h.id)
			ORDER BY p.changed_at DESC, p.id DESC LIMIT 1) p ON true
` + page("h.", "d.site", "(cardinality($7::text[]) = 0 OR h.status = ANY($7::text[]) OR p.status = ANY($7::text[]))"),
		scan: func(r pgx.CollectableRow) (Event, error) {
			var e StatusEvent
			var x string
			var ev Event
			var st, prev string
			err := r.Scan(&x, &ev.Cursor.ID, &ev.At, &e.DeviceID, &e.Site, &e.Name, &st, &e.Reason, &prev)
			e.Status, e.Previous = status.Status(st), status.Status(prev)
			ev.Kind, ev.Status = EventDeviceStatus, &e
			ev.Cursor.XID, _ = strconv.ParseUint(x, 10, 64)
			return ev, err
		}},
	{no: 2, kind: EventCommandState, query: `
		SELECT e.xid::text, e.id, e.recorded_at, c.id::text, c.device_id::text, c.site, c.generation, c.desired, e.state,
			c.actor, c.reason, c.source, e.attempts, e.last_error, e.result_detail, c.created_at, e.updated_at,
			e.completed_at, e.failure_class, e.failure_reason, e.previous_state, d.name
		FROM command_events e
		JOIN commands c ON c.id = e.command_id
		JOIN devices d ON d.id = c.device_id
` + page("e.", "c.site", anyStatus),
		scan: func(r pgx.CollectableRow) (Event, error) {
			var e CommandEvent
			var x, desired, state, class, prev string
			var ev Event
			c := &e.Command
			err := r.Scan(&x, &ev.Cursor.ID, &ev.At, &c.ID, &c.DeviceID, &c.Site, &c.Generation, &desired, &state,
				&c.Actor, &c.Reason, &c.Source, &c.Attempts, &c.LastError, &c.ResultDetail, &c.CreatedAt, &c.UpdatedAt,
				&c.CompletedAt, &class, &c.FailureReason, &prev, &e.DeviceName)
			c.Desired, c.State, c.FailureClass = store.Impairment(desired), store.CommandState(state), store.FailureClass(class)
			e.Previous = store.CommandState(prev)
			ev.Kind, ev.Command = EventCommandState, &e
			ev.Cursor.XID, _ = strconv.ParseUint(x, 10, 64)
			return ev, err
		}},
	{no: 3, kind: EventOperationState, query: feedOperationQuery, scan: scanFeedOperation},
	{no: 4, kind: EventPolicyDecision, query: feedDecisionQuery, scan: scanFeedDecision},
	{no: 5, kind: EventPendingAction, query: feedPendingQuery, scan: scanFeedPending},
}

// Feed sources 3-5 (feedSources above): operation state changes
// (operation_events), policy decisions (policy_decisions) and pending
// action resolutions (policy_pending_events), migrations/00016.

// Feed event kinds of operations and the quarantine policy.
const (
	// EventOperationState: an operation was created or changed state.
	EventOperationState Kind = "OPERATION_STATE"
	// EventPolicyDecision: the quarantine policy logged a decision (dry-run
	// ones included).
	EventPolicyDecision Kind = "POLICY_DECISION"
	// EventPendingAction: a pending action was approved, rejected or
	// expired (its creation is the PENDING decision's event).
	EventPendingAction Kind = "PENDING_ACTION"
)

// OperationEvent is an operation right after one of its state changes.
type OperationEvent struct {
	// Operation has the state, device, attempts, errors, provision state,
	// server id and times of that moment; the other fields (steps, cancel
	// request) are as they are when the feed is read.
	Operation store.Operation
	// Previous is the state before ("" when the operation was created).
	Previous store.OperationState
}

// PolicyDecisionEvent is one logged policy decision.
type PolicyDecisionEvent struct {
	// Decision is as logged (PendingID set when it created one).
	Decision store.PolicyDecision
	// DeviceName is the name of the decision's device.
	DeviceName string
}

// PendingActionEvent is a pending action right after it was resolved.
type PendingActionEvent struct {
	// Action has the state and resolution of that moment.
	Action store.PendingAction
	// Previous is the state before (PendingOpen, normally).
	Previous string
}

// wrapRow scans the columns pre, then those of the wrapped scanner, then
// post: it lets a source reuse a table's scan function between the feed's
// leading (xid, id, time) columns and trailing ones.
type wrapRow struct {
	pre, post []any
}

func (w wrapRow) row(r pgx.CollectableRow) pgx.Row {
	return scanFunc(func(dest ...any) error {
		all := append(append(append([]any{}, w.pre...), dest...), w.post...)
		return r.Scan(all...)
	})
}

type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

var feedOperationQuery = `
		SELECT e.xid::text, e.id, e.recorded_at, o.*, e.state, e.previous_state, COALESCE(e.device_id::text, ''),
			e.attempts, e.last_error, e.failure_reason, e.provision_state, e.server_id, e.updated_at, e.started_at, e.ended_at
		FROM operation_events e
		JOIN operations op ON op.id = e.operation_id,
		LATERAL (SELECT ` + store.OperationColumns + ` FROM operations WHERE operations.id = e.operation_id) o
` + page("e.", "op.site", anyStatus)

func scanFeedOperation(r pgx.CollectableRow) (Event, error) {
	var ev Event
	var x, state, prev, dev string
	var e OperationEvent
	var attempts int32
	var lastErr, reason, provision, server string
	var updated time.Time
	var started, ended *time.Time
	w := wrapRow{pre: []any{&x, &ev.Cursor.ID, &ev.At},
		post: []any{&state, &prev, &dev, &attempts, &lastErr, &reason, &provision, &server, &updated, &started, &ended}}
	o, err := store.ScanOperation(w.row(r))
	o.State, o.DeviceID, o.Attempts, o.LastError, o.FailureReason = store.OperationState(state), dev, attempts, lastErr, reason
	o.ProvisionState, o.ServerID, o.UpdatedAt, o.StartedAt, o.EndedAt = provision, server, updated, started, ended
	e.Operation, e.Previous = o, store.OperationState(prev)
	ev.Kind, ev.Operation = EventOperationState, &e
	ev.Cursor.XID, _ = strconv.ParseUint(x, 10, 64)
	return ev, err
}

// feedDecisionQuery qualifies its columns: unqualified, page's ORDER BY
// xid named the output column xid::text and sorted transaction ids as text
// ("1000" before "999"), so a page read across a change in their number
// of digits skipped decisions.
var feedDecisionQuery = `
		SELECT policy_decisions.xid::text, policy_decisions.id, decided_at, ` + store.DecisionColumns + `
		FROM policy_decisions
` + page("policy_decisions.", "site", anyStatus)

func scanFeedDecision(r pgx.CollectableRow) (Event, error) {
	var ev Event
	var x string
	var e PolicyDecisionEvent
	w := wrapRow{pre: []any{&x, &ev.Cursor.ID, &ev.At}}
	d, err := store.ScanDecision(w.row(r))
	e.Decision, e.DeviceName = d, d.DeviceName
	ev.Kind, ev.Decision = EventPolicyDecision, &e
	ev.Cursor.XID, _ = strconv.ParseUint(x, 10, 64)
	return ev, err
}

var feedPendingQuery = `
		SELECT e.xid::text, e.id, e.recorded_at, ` + store.PendingColumns + `,
			e.state, e.previous_state, e.resolved_at, e.resolved_by, e.resolution_reason, COALESCE(e.command_id::text, '')
		FROM policy_pending_events e
		JOIN policy_pending_actions p ON p.id = e.pending_id
		JOIN devices d ON d.id = p.device_id
		JOIN policy_decisions pd ON pd.id = p.decision_id
` + page("e.", "p.site", anyStatus)

func scanFeedPending(r pgx.CollectableRow) (Event, error) {
	var ev Event
	var x, state, prev, by, why, cmd string
	var resolved *time.Time
	var e PendingActionEvent
	w := wrapRow{pre: []any{&x, &ev.Cursor.ID, &ev.At}, post: []any{&state, &prev, &resolved, &by, &why, &cmd}}
	p, err := store.ScanPending(w.row(r))
	p.State, p.ResolvedAt, p.ResolvedBy, p.ResolutionReason, p.CommandID = state, resolved, by, why, cmd
	e.Action, e.Previous = p, prev
	ev.Kind, ev.Pending = EventPendingAction, &e
	ev.Cursor.XID, _ = strconv.ParseUint(x, 10, 64)
	return ev, err
}

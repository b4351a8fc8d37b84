package store

import (
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Feed sources 3-5 (feed.go's feedSources): operation state changes
// (operation_events), policy decisions (policy_decisions) and pending
// action resolutions (policy_pending_events), migrations/00016.

// Feed event kinds of operations and the quarantine policy.
const (
	// EventOperationState: an operation was created or changed state.
	EventOperationState EventKind = "OPERATION_STATE"
	// EventPolicyDecision: the quarantine policy logged a decision (dry-run
	// ones included).
	EventPolicyDecision EventKind = "POLICY_DECISION"
	// EventPendingAction: a pending action was approved, rejected or
	// expired (its creation is the PENDING decision's event).
	EventPendingAction EventKind = "PENDING_ACTION"
)

// OperationEvent is an operation right after one of its state changes.
type OperationEvent struct {
	// Operation has the state, device, attempts, errors, provision state,
	// server id and times of that moment; the other fields (steps, cancel
	// request) are as they are when the feed is read.
	Operation Operation
	// Previous is the state before ("" when the operation was created).
	Previous OperationState
}

// PolicyDecisionEvent is one logged policy decision.
type PolicyDecisionEvent struct {
	// Decision is as logged (PendingID set when it created one).
	Decision PolicyDecision
	// DeviceName is the name of the decision's device.
	DeviceName string
}

// PendingActionEvent is a pending action right after it was resolved.
type PendingActionEvent struct {
	// Action has the state and resolution of that moment.
	Action PendingAction
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

const feedOperationQuery = `
		SELECT e.xid::text, e.id, e.recorded_at, o.*, e.state, e.previous_state, COALESCE(e.device_id::text, ''),
			e.attempts, e.last_error, e.failure_reason, e.provision_state, e.server_id, e.updated_at, e.started_at, e.ended_at
		FROM operation_events e
		JOIN operations op ON op.id = e.operation_id,
		LATERAL (SELECT ` + operationColumns + ` FROM operations WHERE operations.id = e.operation_id) o
		WHERE e.xid < $1::text::xid8 AND (e.xid, e.id) > ($2::text::xid8, $3::bigint)
		  AND ($5 = '' OR op.site = $5) AND ($6::text[] IS NULL OR op.site = ANY($6::text[]))
		  AND cardinality($7::text[]) >= 0
		ORDER BY e.xid, e.id LIMIT $4`

func scanFeedOperation(r pgx.CollectableRow) (FeedEvent, error) {
	var ev FeedEvent
	var x, state, prev, dev string
	var e OperationEvent
	var attempts int32
	var lastErr, reason, provision, server string
	var updated time.Time
	var started, ended *time.Time
	w := wrapRow{pre: []any{&x, &ev.Cursor.ID, &ev.At},
		post: []any{&state, &prev, &dev, &attempts, &lastErr, &reason, &provision, &server, &updated, &started, &ended}}
	o, err := scanOperation(w.row(r))
	o.State, o.DeviceID, o.Attempts, o.LastError, o.FailureReason = OperationState(state), dev, attempts, lastErr, reason
	o.ProvisionState, o.ServerID, o.UpdatedAt, o.StartedAt, o.EndedAt = provision, server, updated, started, ended
	e.Operation, e.Previous = o, OperationState(prev)
	ev.Kind, ev.Operation = EventOperationState, &e
	ev.Cursor.XID, _ = strconv.ParseUint(x, 10, 64)
	return ev, err
}

const feedDecisionQuery = `
		SELECT xid::text, id, decided_at, ` + decisionColumns + `
		FROM policy_decisions
		WHERE xid < $1::text::xid8 AND (xid, id) > ($2::text::xid8, $3::bigint)
		  AND ($5 = '' OR site = $5) AND ($6::text[] IS NULL OR site = ANY($6::text[]))
		  AND cardinality($7::text[]) >= 0
		ORDER BY xid, id LIMIT $4`

func scanFeedDecision(r pgx.CollectableRow) (FeedEvent, error) {
	var ev FeedEvent
	var x string
	var e PolicyDecisionEvent
	w := wrapRow{pre: []any{&x, &ev.Cursor.ID, &ev.At}}
	d, err := scanDecision(w.row(r))
	e.Decision, e.DeviceName = d, d.DeviceName
	ev.Kind, ev.Decision = EventPolicyDecision, &e
	ev.Cursor.XID, _ = strconv.ParseUint(x, 10, 64)
	return ev, err
}

const feedPendingQuery = `
		SELECT e.xid::text, e.id, e.recorded_at, ` + pendingColumns + `,
			e.state, e.previous_state, e.resolved_at, e.resolved_by, e.resolution_reason, COALESCE(e.command_id::text, '')
		FROM policy_pending_events e
		JOIN policy_pending_actions p ON p.id = e.pending_id
		JOIN devices d ON d.id = p.device_id
		JOIN policy_decisions pd ON pd.id = p.decision_id
		WHERE e.xid < $1::text::xid8 AND (e.xid, e.id) > ($2::text::xid8, $3::bigint)
		  AND ($5 = '' OR p.site = $5) AND ($6::text[] IS NULL OR p.site = ANY($6::text[]))
		  AND cardinality($7::text[]) >= 0
		ORDER BY e.xid, e.id LIMIT $4`

func scanFeedPending(r pgx.CollectableRow) (FeedEvent, error) {
	var ev FeedEvent
	var x, state, prev, by, why, cmd string
	var resolved *time.Time
	var e PendingActionEvent
	w := wrapRow{pre: []any{&x, &ev.Cursor.ID, &ev.At}, post: []any{&state, &prev, &resolved, &by, &why, &cmd}}
	p, err := scanPending(w.row(r))
	p.State, p.ResolvedAt, p.ResolvedBy, p.ResolutionReason, p.CommandID = state, resolved, by, why, cmd
	e.Action, e.Previous = p, prev
	ev.Kind, ev.Pending = EventPendingAction, &e
	ev.Cursor.XID, _ = strconv.ParseUint(x, 10, 64)
	return ev, err
}

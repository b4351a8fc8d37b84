package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/propagation"
)

// OperationState is an operation's life-cycle state as stored (proto
// OperationState without its prefix).
type OperationState string

// Operation states. SUCCEEDED, FAILED and CANCELLED are final: nothing
// moves an operation out of them.
const (
	OperationPending   OperationState = "PENDING"
	OperationRunning   OperationState = "RUNNING"
	OperationSucceeded OperationState = "SUCCEEDED"
	OperationFailed    OperationState = "FAILED"
	OperationCancelled OperationState = "CANCELLED"
)

// Final reports whether s is a final state.
func (s OperationState) Final() bool {
	return s == OperationSucceeded || s == OperationFailed || s == OperationCancelled
}

// OperationKind is what an operation does, as stored (proto OperationKind
// without its prefix: "ENROL", "INSPECT", ...).
type OperationKind string

// KindEnrol is the one kind whose target is a node spec, not a device.
const KindEnrol OperationKind = "ENROL"

// Errors of the operation store (wrapped; nothing written when returned).
var (
	// ErrOperationActive: the device (or, for ENROL, the node name at the
	// site) already has a PENDING or RUNNING operation.
	ErrOperationActive = errors.New("an operation is already active")
	// ErrOperationFinished: the operation is in a final state.
	ErrOperationFinished = errors.New("operation finished")
)

// NewOperation is one operation to store (StartOperation, one per target).
type NewOperation struct {
	// ID is the operation id (a UUID the caller chose, so it can keep an
	// ENROL's credentials under it before the row exists).
	ID   string
	Site string
	// DeviceID is the node UUID; "" for ENROL.
	DeviceID   string
	DeviceName string
	Kind       OperationKind
	// Node is the redacted NodeSpec as protojson (ENROL only; nil else).
	// It must never carry a driver_info value.
	Node json.RawMessage
	// Params is the OperationParams as protojson.
	Params                json.RawMessage
	Actor, Reason, Source string
	Forced                bool
	// ProvisionState is the node's provision_state as last reported, the
	// starting point shown until the satellite reports.
	ProvisionState string
	// SecretHolder names the replica process keeping an ENROL's
	// driver_info in memory, or the sealing key ("sealed:<key id>"); ""
	// when the ENROL has no driver_info and for other kinds.
	SecretHolder string
	// SealedDriverInfo is an ENROL's driver_info sealed by
	// hub/operations/vault.Sealer (sealed mode; nil else). Stored until the
	// node exists or the operation ends (migrations/00017).
	SealedDriverInfo []byte
}

// Operation is a stored operation.
type Operation struct {
	ID, GroupID, Site string
	// DeviceID is "" for an ENROL whose node does not exist yet.
	DeviceID, DeviceName  string
	Kind                  OperationKind
	Node, Params, Steps   json.RawMessage
	State                 OperationState
	Actor, Reason, Source string
	Forced                bool
	// Attempts counts deliveries; ProgressAttempt is the attempt of the
	// last accepted progress.
	Attempts, ProgressAttempt int32
	LastError, FailureReason  string
	ProvisionState, ServerID  string
	CancelRequested           bool
	CancelActor, CancelReason string
	SecretHolder              string
	// SealedDriverInfo: see NewOperation; nil once the node exists (a
	// DeviceID) or the operation ended.
	SealedDriverInfo        []byte
	TraceParent, TraceState string
	CreatedAt, UpdatedAt    time.Time
	SentAt, ProgressAt      *time.Time
	StartedAt, EndedAt      *time.Time
}

const operationColumns = `id::text, group_id::text, site, coalesce(device_id::text, ''), device_name, kind,
	coalesce(node, 'null'::jsonb), params, steps, state, actor, reason, source, forced, attempts, progress_attempt,
	last_error, failure_reason, provision_state, server_id, cancel_requested, cancel_actor, cancel_reason,
	secret_holder, sealed_driver_info, traceparent, tracestate, created_at, updated_at, sent_at, progress_at, started_at, ended_at`

func scanOperation(r pgx.Row) (Operation, error) {
	var o Operation
	var node, params, steps []byte
	var kind, state string
	err := r.Scan(&o.ID, &o.GroupID, &o.Site, &o.DeviceID, &o.DeviceName, &kind, &node, &params, &steps, &state,
		&o.Actor, &o.Reason, &o.Source, &o.Forced, &o.Attempts, &o.ProgressAttempt, &o.LastError, &o.FailureReason,
		&o.ProvisionState, &o.ServerID, &o.CancelRequested, &o.CancelActor, &o.CancelReason, &o.SecretHolder,
		&o.SealedDriverInfo, &o.TraceParent, &o.TraceState, &o.CreatedAt, &o.UpdatedAt, &o.SentAt, &o.ProgressAt, &o.StartedAt, &o.EndedAt)
	if len(node) > 0 && string(node) != "null" {
		o.Node = node
	}
	o.Params, o.Steps, o.Kind, o.State = params, steps, OperationKind(kind), OperationState(state)
	return o, err
}

// OperationsChannel is the LISTEN/NOTIFY channel on which every change of
// an operation is announced (payload: the operation id), for
// WatchOperation. A hint only: watchers poll too.
const OperationsChannel = "ironlink_operations"

// isUniqueViolation reports a PostgreSQL unique_violation (23505).
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// CreateOperations stores ops (one per target) under one new group id, in
// one transaction, and notifies each site on NotifyChannel (the link's
// delivery hint) and OperationsChannel. The W3C trace context of ctx goes
// with each operation. It returns the group id and the stored operations,
// in the order of ops.
//
// Errors (nothing written): ErrOperationActive (wrapped with the device or
// node name) when a target already has an active operation, also when two
// requests race for it.
func (s *Store) CreateOperations(ctx context.Context, ops []NewOperation) (string, []Operation, error) {
	var group string
	var out []Operation
	tc := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, tc)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		if err := tx.QueryRow(ctx, `SELECT gen_random_uuid()::text`).Scan(&group); err != nil {
			return fmt.Errorf("new group id: %w", err)
		}
		sites := map[string]bool{}
		for _, n := range ops {
			var dev any
			if n.DeviceID != "" {
				dev = n.DeviceID
			}
			var node any
			if n.Node != nil {
				node = []byte(n.Node)
			}
			params := []byte(n.Params)
			if params == nil {
				params = []byte("{}")
			}
			o, err := scanOperation(tx.QueryRow(ctx, `
				INSERT INTO operations (id, group_id, site, device_id, device_name, kind, node, params, actor, reason, source,
					forced, provision_state, secret_holder, traceparent, tracestate, sealed_driver_info)
				VALUES ($16, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $17)
				RETURNING `+operationColumns,
				group, n.Site, dev, n.DeviceName, string(n.Kind), node, params, n.Actor, n.Reason, n.Source,
				n.Forced, n.ProvisionState, n.SecretHolder, tc.Get("traceparent"), tc.Get("tracestate"), n.ID, n.SealedDriverInfo))
			if isUniqueViolation(err) {
				target := n.DeviceID
				if target == "" {
					target = "node " + n.DeviceName + " at site " + n.Site
				} else {
					target = "device " + target
				}
				return fmt.Errorf("%s: %w", target, ErrOperationActive)
			}
			if err != nil {
				return fmt.Errorf("insert operation: %w", err)
			}
			if err := endRunsSupersededBy(ctx, tx, o); err != nil {
				return err
			}
			if err := createValidationRun(ctx, tx, o); err != nil {
				return err
			}
			out = append(out, o)
			sites[n.Site] = true
		}
		for site := range sites {
			if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, NotifyChannel, site); err != nil {
				return fmt.Errorf("notify site %q: %w", site, err)
			}
		}
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	return group, out, nil
}

// ActiveOperation returns the PENDING or RUNNING operation of device id, if
// any (ok=false when none).
func (s *Store) ActiveOperation(ctx context.Context, deviceID string) (Operation, bool, error) {
	o, err := scanOperation(s.pool.QueryRow(ctx, `SELECT `+operationColumns+` FROM operations
		WHERE device_id = $1 AND state IN ('PENDING', 'RUNNING')`, deviceID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Operation{}, false, nil
	}
	if err != nil {
		return Operation{}, false, fmt.Errorf("active operation of device %s: %w", deviceID, err)
	}
	return o, true, nil
}

// GetOperation returns operation id. Errors: ErrNotFound.
func (s *Store) GetOperation(ctx context.Context, id string) (Operation, error) {
	o, err := scanOperation(s.pool.QueryRow(ctx, `SELECT `+operationColumns+` FROM operations WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Operation{}, fmt.Errorf("operation %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Operation{}, fmt.Errorf("load operation %s: %w", id, err)
	}
	return o, nil
}

// OperationFilter selects operations for ListOperations; zero fields do
// not filter.
type OperationFilter struct {
	// Sites: only these (nil: every site). An empty non-nil slice matches nothing.
	Sites    []string
	DeviceID string
	GroupID  string
	Kinds    []OperationKind
	States   []OperationState
	// After is the keyset position: only operations older than it
	// (created_at, id) in the newest-first order; zero: from the newest.
	AfterTime time.Time
	AfterID   string
	Limit     int
}

// ListOperations returns operations matching f, newest first (created_at,
// then id, descending), at most f.Limit.
func (s *Store) ListOperations(ctx context.Context, f OperationFilter) ([]Operation, error) {
	kinds := make([]string, len(f.Kinds))
	for i, k := range f.Kinds {
		kinds[i] = string(k)
	}
	states := make([]string, len(f.States))
	for i, st := range f.States {
		states[i] = string(st)
	}
	var after any
	if !f.AfterTime.IsZero() {
		after = f.AfterTime
	}
	afterID := nullable(f.AfterID)
	rows, err := s.pool.Query(ctx, `
		SELECT `+operationColumns+` FROM operations
		WHERE ($1::text[] IS NULL OR site = ANY($1))
		  AND ($2::uuid IS NULL OR device_id = $2)
		  AND ($3::uuid IS NULL OR group_id = $3)
		  AND (cardinality($4::text[]) = 0 OR kind = ANY($4))
		  AND (cardinality($5::text[]) = 0 OR state = ANY($5))
		  AND ($6::timestamptz IS NULL OR (created_at, id) < ($6, $7::uuid))
		ORDER BY created_at DESC, id DESC LIMIT $8`,
		f.Sites, nullable(f.DeviceID), nullable(f.GroupID), kinds, states, after, afterID, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list operations: %w", err)
	}
	ops, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Operation, error) { return scanOperation(r) })
	if err != nil {
		return nil, fmt.Errorf("list operations: %w", err)
	}
	return ops, nil
}

// notifyOperation announces a change of operation id on OperationsChannel.
func notifyOperation(ctx context.Context, tx pgx.Tx, id string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, OperationsChannel, id); err != nil {
		return fmt.Errorf("notify operation %s: %w", id, err)
	}
	return nil
}

// CancelOperation carries out an operator's cancel of operation id: a
// PENDING operation becomes CANCELLED at once; a RUNNING one gets
// cancel_requested (with actor and reason) and becomes due for delivery
// (sent_at cleared, the site notified), provided abortable(provision_state)
// — the caller's judgement of whether Ironic can abort from the last
// reported state. A RUNNING operation whose cancel is already requested is
// returned unchanged.
//
// Errors (nothing written): ErrNotFound; ErrOperationFinished for a final
// state; ErrNotCancellable (wrapped with the provision state) when
// abortable says no.
func (s *Store) CancelOperation(ctx context.Context, id, actor, reason string, abortable func(provisionState string) bool) (Operation, error) {
	var o Operation
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		o, err = scanOperation(tx.QueryRow(ctx, `SELECT `+operationColumns+` FROM operations WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("operation %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("load operation %s: %w", id, err)
		}
		switch {
		case o.State.Final():
			return fmt.Errorf("operation %s is %s: %w", id, o.State, ErrOperationFinished)
		case o.State == OperationPending:
			o, err = scanOperation(tx.QueryRow(ctx, `UPDATE operations SET state = 'CANCELLED', cancel_actor = $2,
				cancel_reason = $3, updated_at = now(), ended_at = now() WHERE id = $1 RETURNING `+operationColumns, id, actor, reason))
		case o.CancelRequested:
			return nil
		case !abortable(o.ProvisionState):
			return fmt.Errorf("operation %s is running with the node in provision state %q: %w", id, o.ProvisionState, ErrNotCancellable)
		default:
			o, err = scanOperation(tx.QueryRow(ctx, `UPDATE operations SET cancel_requested = true, cancel_actor = $2,
				cancel_reason = $3, sent_at = NULL, updated_at = now() WHERE id = $1 RETURNING `+operationColumns, id, actor, reason))
			if err == nil {
				_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, NotifyChannel, o.Site)
			}
		}
		if err != nil {
			return fmt.Errorf("cancel operation %s: %w", id, err)
		}
		return notifyOperation(ctx, tx, id)
	})
	return o, err
}

// ErrNotCancellable: a RUNNING operation's node is in a provision state
// Ironic cannot abort from.
var ErrNotCancellable = errors.New("the node's provision state cannot be aborted")

package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Repair handoffs (migrations/00030; docs/reference/policy.md "Repair
// handoff"): a device the ladders could not fix is held for repair
// (quarantine hold HolderRepair) and announced by an outgoing webhook,
// every attempt recorded; closing the handoff releases the device to
// validation (not offered to customers).

// HolderRepair is the quarantine hold of a device handed off for repair.
const HolderRepair = "repair"

// Handoff reasons.
const (
	HandoffLadderExhausted   = "LadderExhausted"
	HandoffBudgetSpent       = "BudgetSpent"
	HandoffRecommendedAction = "RecommendedAction"
)

// Webhook delivery states of a handoff.
const (
	WebhookNone      = "NONE"
	WebhookPending   = "PENDING"
	WebhookDelivered = "DELIVERED"
)

// ErrHandoffClosed: the handoff was closed already; nothing was written.
var ErrHandoffClosed = errors.New("handoff already closed")

// Handoff is one repair handoff.
type Handoff struct {
	ID                       int64
	DeviceID, Site, Rule     string
	DeviceName               string
	LadderID, HoldGeneration int64
	Reason, Detail, State    string
	CreatedAt                time.Time
	ClosedAt                 *time.Time
	ClosedBy, CloseNote      string
	WebhookState             string
	WebhookAttempts          int
	WebhookNextAt            time.Time
	DeliveredAt              *time.Time
}

// WebhookAttempt is one delivery attempt of a handoff's webhook.
type WebhookAttempt struct {
	Attempt     int
	StatusCode  int
	Error       string
	Duration    time.Duration
	AttemptedAt time.Time
}

const handoffColumns = `h.id, h.device_id::text, h.site, h.rule, d.name, COALESCE(h.ladder_id, 0), h.hold_generation, h.reason,
	h.detail, h.state, h.created_at, h.closed_at, h.closed_by, h.close_note, h.webhook_state, h.webhook_attempts,
	h.webhook_next_at, h.delivered_at`

func scanHandoff(r pgx.Row) (Handoff, error) {
	var h Handoff
	err := r.Scan(&h.ID, &h.DeviceID, &h.Site, &h.Rule, &h.DeviceName, &h.LadderID, &h.HoldGeneration, &h.Reason, &h.Detail,
		&h.State, &h.CreatedAt, &h.ClosedAt, &h.ClosedBy, &h.CloseNote, &h.WebhookState, &h.WebhookAttempts,
		&h.WebhookNextAt, &h.DeliveredAt)
	return h, err
}

// NewHandoff is a handoff to create.
type NewHandoff struct {
	Device         RemediationDevice
	Ladder         *RemediationLadder // nil when no ladder ran (budget spent)
	Reason, Detail string
	// Webhook: a webhook is configured (else the handoff's webhook state
	// is NONE).
	Webhook bool
}

// CreateHandoff hands a device off for repair in one transaction: the
// handoff row (one per quarantine of a rule: created=false, nothing
// written, when it exists), the ladder ended HANDED_OFF, the quarantine
// hold HolderRepair added (actor "remediation") and a HANDED_OFF event.
func (s *Store) CreateHandoff(ctx context.Context, n NewHandoff) (Handoff, bool, error) {
	var h Handoff
	created := false
	d := n.Device
	err := s.inTxOn(ctx, s.commandPool(), func(tx pgx.Tx) error {
		var ladder any
		if n.Ladder != nil {
			ladder = n.Ladder.ID
		}
		webhook := WebhookNone
		if n.Webhook {
			webhook = WebhookPending
		}
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO remediation_handoffs (device_id, site, rule, ladder_id, hold_generation, reason, detail, webhook_state)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING RETURNING id`,
			d.DeviceID, d.Site, d.Rule, ladder, d.HoldGeneration, n.Reason, n.Detail, webhook).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("hand off %s: %w", d.DeviceID, err)
		}
		created = true
		if n.Ladder != nil {
			if _, err := tx.Exec(ctx, `UPDATE remediation_ladders SET state = 'HANDED_OFF', detail = $2, waiting = '',
				ended_at = now(), updated_at = now() WHERE id = $1 AND state = 'RUNNING'`, n.Ladder.ID, n.Detail); err != nil {
				return fmt.Errorf("end ladder %d: %w", n.Ladder.ID, err)
			}
		}
		a := ImpairmentAction{Actor: "remediation", Reason: "held for repair: " + n.Reason + ": " + n.Detail, Source: SourcePolicy}
		if _, err := s.quarantineTx(ctx, tx, d.DeviceID, HolderRepair, a); err != nil {
			return err
		}
		if h, err = scanHandoff(tx.QueryRow(ctx, `SELECT `+handoffColumns+` FROM remediation_handoffs h
			JOIN devices d ON d.id = h.device_id WHERE h.id = $1`, id)); err != nil {
			return fmt.Errorf("read handoff %d: %w", id, err)
		}
		return recordLadderEvent(ctx, tx, LadderEvent{DeviceID: d.DeviceID, Site: d.Site, Rule: d.Rule, LadderID: h.LadderID,
			HandoffID: id, Event: "HANDED_OFF", Detail: n.Reason + ": " + n.Detail})
	})
	return h, created, err
}

// CloseHandoff closes open handoff id as repaired by actor (from source)
// with note, and
// releases its device to validation in the same transaction: every hold
// goes and the device comes back not offered to customers (desired
// RELEASED_UNOFFERED, status HELD), whatever it was before; a
// HANDOFF_CLOSED event. Errors: ErrNotFound; ErrHandoffClosed.
func (s *Store) CloseHandoff(ctx context.Context, id int64, actor, note, source string) (Handoff, error) {
	var h Handoff
	err := s.inTxOn(ctx, s.commandPool(), func(tx pgx.Tx) error {
		var state, device string
		err := tx.QueryRow(ctx, `SELECT state, device_id::text FROM remediation_handoffs WHERE id = $1 FOR UPDATE`, id).Scan(&state, &device)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("handoff %d: %w", id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("lock handoff %d: %w", id, err)
		}
		if state != "OPEN" {
			return fmt.Errorf("handoff %d: %w", id, ErrHandoffClosed)
		}
		if _, err := tx.Exec(ctx, `UPDATE remediation_handoffs SET state = 'CLOSED', closed_at = now(), closed_by = $2, close_note = $3
			WHERE id = $1`, id, actor, note); err != nil {
			return fmt.Errorf("close handoff %d: %w", id, err)
		}
		// To validation, never to customers: what the quarantine took is
		// forgotten, so the release leaves the device not offered.
		if _, err := tx.Exec(ctx, `UPDATE devices SET pre_quarantine_offered = false WHERE id = $1`, device); err != nil {
			return fmt.Errorf("device %s: %w", device, err)
		}
		a := ImpairmentAction{Actor: actor, Reason: "repaired (handoff " + fmt.Sprint(id) + "): " + note, Source: source}
		if _, _, err := s.releaseTx(ctx, tx, device, HolderRepair, true, a, false); err != nil {
			return fmt.Errorf("release %s to validation: %w", device, err)
		}
		if h, err = scanHandoff(tx.QueryRow(ctx, `SELECT `+handoffColumns+` FROM remediation_handoffs h
			JOIN devices d ON d.id = h.device_id WHERE h.id = $1`, id)); err != nil {
			return fmt.Errorf("read handoff %d: %w", id, err)
		}
		return recordLadderEvent(ctx, tx, LadderEvent{DeviceID: h.DeviceID, Site: h.Site, Rule: h.Rule, LadderID: h.LadderID,
			HandoffID: id, Event: "HANDOFF_CLOSED", Detail: "repaired by " + actor + ": " + note})
	})
	return h, err
}

// HandoffFilter selects handoffs; zero fields do not filter.
type HandoffFilter struct {
	Site, DeviceID string
	OpenOnly       bool
	// Limit is at most this many (default 100).
	Limit int
}

// ListHandoffs returns handoffs matching f, newest first.
func (s *Store) ListHandoffs(ctx context.Context, f HandoffFilter) ([]Handoff, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT `+handoffColumns+` FROM remediation_handoffs h JOIN devices d ON d.id = h.device_id
		WHERE ($1 = '' OR h.site = $1) AND ($2 = '' OR h.device_id::text = $2) AND (NOT $3 OR h.state = 'OPEN')
		ORDER BY h.id DESC LIMIT $4`, f.Site, f.DeviceID, f.OpenOnly, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list handoffs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Handoff, error) { return scanHandoff(r) })
	if err != nil {
		return nil, fmt.Errorf("list handoffs: %w", err)
	}
	return out, nil
}

// GetHandoff returns handoff id. Errors: ErrNotFound.
func (s *Store) GetHandoff(ctx context.Context, id int64) (Handoff, error) {
	h, err := scanHandoff(s.pool.QueryRow(ctx, `SELECT `+handoffColumns+` FROM remediation_handoffs h
		JOIN devices d ON d.id = h.device_id WHERE h.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return h, fmt.Errorf("handoff %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return h, fmt.Errorf("handoff %d: %w", id, err)
	}
	return h, nil
}

// WebhookAttempts returns the delivery attempts of handoff id, in order.
func (s *Store) WebhookAttempts(ctx context.Context, id int64) ([]WebhookAttempt, error) {
	rows, err := s.pool.Query(ctx, `SELECT attempt, status_code, error, duration_ms, attempted_at
		FROM remediation_webhook_attempts WHERE handoff_id = $1 ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("webhook attempts of handoff %d: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WebhookAttempt, error) {
		var a WebhookAttempt
		var ms int
		err := r.Scan(&a.Attempt, &a.StatusCode, &a.Error, &ms, &a.AttemptedAt)
		a.Duration = time.Duration(ms) * time.Millisecond
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("webhook attempts of handoff %d: %w", id, err)
	}
	return out, nil
}

// MaxAttemptsShown is how many of a handoff's latest webhook attempts
// WebhookAttemptsOf returns.
const MaxAttemptsShown = 20

// WebhookAttemptsOf returns the latest MaxAttemptsShown webhook attempts
// of each handoff of ids, oldest first (a handoff without any is absent).
func (s *Store) WebhookAttemptsOf(ctx context.Context, ids []int64) (map[int64][]WebhookAttempt, error) {
	out := map[int64][]WebhookAttempt{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT handoff_id, attempt, status_code, error, duration_ms, attempted_at FROM (
		SELECT *, row_number() OVER (PARTITION BY handoff_id ORDER BY id DESC) AS rn
		FROM remediation_webhook_attempts WHERE handoff_id = ANY($1)) x
		WHERE rn <= $2 ORDER BY handoff_id, id`, ids, MaxAttemptsShown)
	if err != nil {
		return nil, fmt.Errorf("webhook attempts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var a WebhookAttempt
		var ms int
		if err := rows.Scan(&id, &a.Attempt, &a.StatusCode, &a.Error, &ms, &a.AttemptedAt); err != nil {
			return nil, fmt.Errorf("webhook attempts: %w", err)
		}
		a.Duration = time.Duration(ms) * time.Millisecond
		out[id] = append(out[id], a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("webhook attempts: %w", err)
	}
	return out, nil
}

// ClaimHandoffWebhooks takes up to limit handoffs whose webhook is due
// (PENDING, next attempt not after now) and pushes their next attempt to
// now+lease, so that no other replica sends them meanwhile (FOR UPDATE
// SKIP LOCKED). The caller records each attempt with RecordWebhookAttempt.
func (s *Store) ClaimHandoffWebhooks(ctx context.Context, lease time.Duration, limit int) ([]Handoff, error) {
	rows, err := s.pool.Query(ctx, `
		WITH due AS (SELECT id FROM remediation_handoffs WHERE webhook_state = 'PENDING' AND webhook_next_at <= now()
			ORDER BY webhook_next_at LIMIT $2 FOR UPDATE SKIP LOCKED)
		UPDATE remediation_handoffs h SET webhook_next_at = now() + $1::interval
		FROM due, devices d WHERE h.id = due.id AND d.id = h.device_id
		RETURNING `+handoffColumns, lease.String(), limit)
	if err != nil {
		return nil, fmt.Errorf("claim handoff webhooks: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Handoff, error) { return scanHandoff(r) })
	if err != nil {
		return nil, fmt.Errorf("claim handoff webhooks: %w", err)
	}
	return out, nil
}

// RecordWebhookAttempt records attempt a of handoff id's webhook (sent at
// a.AttemptedAt; zero: now): delivered (a 2xx) ends the delivery;
// otherwise the next attempt is due at next.
func (s *Store) RecordWebhookAttempt(ctx context.Context, id int64, a WebhookAttempt, delivered bool, next time.Time) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		at := a.AttemptedAt
		if at.IsZero() {
			at = time.Now()
		}
		if _, err := tx.Exec(ctx, `INSERT INTO remediation_webhook_attempts (handoff_id, attempt, status_code, error, duration_ms, attempted_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, id, a.Attempt, a.StatusCode, a.Error, a.Duration.Milliseconds(), at); err != nil {
			return fmt.Errorf("record webhook attempt of handoff %d: %w", id, err)
		}
		q := `UPDATE remediation_handoffs SET webhook_attempts = $2, webhook_next_at = $3 WHERE id = $1`
		if delivered {
			q = `UPDATE remediation_handoffs SET webhook_attempts = $2, webhook_next_at = $3, webhook_state = 'DELIVERED', delivered_at = now() WHERE id = $1`
		}
		if _, err := tx.Exec(ctx, q, id, a.Attempt, next); err != nil {
			return fmt.Errorf("handoff %d: %w", id, err)
		}
		return nil
	})
}

// DeviceNames returns the node names of the devices of ids that have one
// (a device without a name, or unknown, is absent).
func (s *Store) DeviceNames(ctx context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id::text, name FROM devices WHERE id::text = ANY($1) AND name <> ''`, ids)
	if err != nil {
		return nil, fmt.Errorf("device names: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, name string
		if err := rows.Scan(&id, &name); err != nil {
			return nil, fmt.Errorf("device names: %w", err)
		}
		out[id] = name
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("device names: %w", err)
	}
	return out, nil
}

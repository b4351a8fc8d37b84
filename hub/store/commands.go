package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SetDesiredImpairment records an operator's (or a policy's) wish for a
// device in one transaction: the device's desired impairment state gets the
// next generation, a PENDING command carries it, every older unfinished
// command of the device becomes SUPERSEDED, the change is appended to the
// impairment history, the status is re-derived, and the site is notified on
// NotifyChannel (delivered at commit). The command keeps the W3C trace
// context of ctx (Command.TraceParent, TraceState) for its delivery.
//
// Errors: ErrNotFound when the device does not exist (nothing is written).
//
// It is the raw form of Quarantine, Release and Offer (holds.go), kept for
// tools and tests: QUARANTINED adds the hold HolderFor(source) as
// Quarantine does; RELEASED releases every hold as Release with all=true
// does (giving back what the quarantine took, so the desired state may
// become RELEASED_UNOFFERED), or offers the device as Offer does when it
// holds no quarantine.
func (s *Store) SetDesiredImpairment(ctx context.Context, deviceID string, desired Impairment, actor, reason, source string) (Command, error) {
	var cmd Command
	err := s.inTxOn(ctx, s.commandPool(), func(tx pgx.Tx) (err error) {
		a := ImpairmentAction{Actor: actor, Reason: reason, Source: source}
		switch desired {
		case ImpairmentQuarantined:
			cmd, err = s.quarantineTx(ctx, tx, deviceID, HolderFor(source, ""), a)
			return err
		case ImpairmentReleased:
			var p ReleasePlan
			p, cmd, err = s.releaseTx(ctx, tx, deviceID, "", true, a, false)
			if err == nil && p.Outcome == ReleaseNotQuarantined {
				cmd, err = s.setDesiredTx(ctx, tx, deviceID, ImpairmentReleased, a.with(ActionOffer, ""))
			}
			return err
		}
		return fmt.Errorf("desired state %q: %w", desired, ErrInvalidImpairment)
	})
	return cmd, err
}

// ErrInvalidImpairment: a desired state SetDesiredImpairment does not set
// (only QUARANTINED and RELEASED); nothing was written.
var ErrInvalidImpairment = errors.New("desired state must be QUARANTINED or RELEASED")

// ErrNotRetryable: RetryCommand was asked to retry a command that is not
// FAILED (pending, sent, succeeded or superseded); nothing was written.
var ErrNotRetryable = errors.New("only a FAILED command can be retried")

// RetryCommand is an operator's retry of the FAILED command id: in one
// transaction it re-issues the command's desired state for its device as
// SetDesiredImpairment does (next generation, a PENDING command, the
// history entry with actor, reason and source, the site notified), so a
// PERMANENT failure goes out again. The device row is locked first (the
// lock order of SetDesiredImpairment and RecordResult), so a concurrent
// quarantine or release either comes first and makes the command
// SUPERSEDED (ErrNotRetryable) or comes after the retry and wins.
//
// Errors: ErrNotFound for an unknown command; ErrNotRetryable when the
// command is not FAILED. Nothing is written on error.
func (s *Store) RetryCommand(ctx context.Context, id, actor, reason, source string) (Command, error) {
	var cmd Command
	err := s.inTxOn(ctx, s.commandPool(), func(tx pgx.Tx) error {
		var deviceID, state, desired string
		err := tx.QueryRow(ctx, `
			SELECT d.id::text FROM devices d
			WHERE d.id = (SELECT device_id FROM commands WHERE id = $1) FOR NO KEY UPDATE OF d`, id).Scan(&deviceID)
		if err == nil {
			err = tx.QueryRow(ctx, `SELECT state, desired FROM commands WHERE id = $1 FOR UPDATE`, id).Scan(&state, &desired)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("command %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("load command %s: %w", id, err)
		}
		if state != string(CommandFailed) {
			return fmt.Errorf("command %s is %s: %w", id, state, ErrNotRetryable)
		}
		var action, holder string
		if err := tx.QueryRow(ctx, `SELECT action, holder FROM commands WHERE id = $1`, id).Scan(&action, &holder); err != nil {
			return fmt.Errorf("load command %s: %w", id, err)
		}
		cmd, err = s.setDesiredTx(ctx, tx, deviceID, Impairment(desired),
			ImpairmentAction{Action: Action(action), Holder: holder, Actor: actor, Reason: reason, Source: source})
		return err
	})
	return cmd, err
}

const commandColumns = `id::text, device_id::text, site, generation, desired, state, actor, reason, source,
	attempts, last_error, result_detail, created_at, updated_at, completed_at, failure_class, failure_reason,
	traceparent, tracestate, action, holder`

const commandColumnsC = `c.id::text, c.device_id::text, c.site, c.generation, c.desired, c.state, c.actor, c.reason, c.source,
	c.attempts, c.last_error, c.result_detail, c.created_at, c.updated_at, c.completed_at, c.failure_class, c.failure_reason,
	c.traceparent, c.tracestate, c.action, c.holder`

func scanCommand(r pgx.Row) (Command, error) {
	var c Command
	var desired, state, class, action string
	err := r.Scan(&c.ID, &c.DeviceID, &c.Site, &c.Generation, &desired, &state, &c.Actor, &c.Reason, &c.Source,
		&c.Attempts, &c.LastError, &c.ResultDetail, &c.CreatedAt, &c.UpdatedAt, &c.CompletedAt, &class, &c.FailureReason,
		&c.TraceParent, &c.TraceState, &action, &c.Holder)
	c.Desired, c.State, c.FailureClass, c.Action = Impairment(desired), CommandState(state), FailureClass(class), Action(action)
	return c, err
}

package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/propagation"
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
func (s *Store) SetDesiredImpairment(ctx context.Context, deviceID string, desired Impairment, actor, reason, source string) (Command, error) {
	var cmd Command
	err := s.inTxOn(ctx, s.commandPool(), func(tx pgx.Tx) (err error) {
		cmd, err = s.setDesiredTx(ctx, tx, deviceID, desired, actor, reason, source)
		return err
	})
	return cmd, err
}

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
			WHERE d.id = (SELECT device_id FROM commands WHERE id = $1) FOR UPDATE`, id).Scan(&deviceID)
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
		cmd, err = s.setDesiredTx(ctx, tx, deviceID, Impairment(desired), actor, reason, source)
		return err
	})
	return cmd, err
}

// setDesiredTx is SetDesiredImpairment inside tx.
func (s *Store) setDesiredTx(ctx context.Context, tx pgx.Tx, deviceID string, desired Impairment, actor, reason, source string) (Command, error) {
	var site string
	var gen int64
	err := tx.QueryRow(ctx, `
		UPDATE devices SET desired_impairment = $2, desired_generation = desired_generation + 1
		WHERE id = $1 RETURNING site, desired_generation`, deviceID, string(desired)).Scan(&site, &gen)
	if errors.Is(err, pgx.ErrNoRows) {
		return Command{}, fmt.Errorf("device %s: %w", deviceID, ErrNotFound)
	}
	if err != nil {
		return Command{}, fmt.Errorf("set desired state of device %s: %w", deviceID, err)
	}
	_, err = tx.Exec(ctx, `
		UPDATE commands SET state = 'SUPERSEDED', updated_at = now(), completed_at = now()
		WHERE device_id = $1 AND state IN ('PENDING', 'SENT', 'FAILED')`, deviceID)
	if err != nil {
		return Command{}, fmt.Errorf("supersede older commands of device %s: %w", deviceID, err)
	}
	// The caller's W3C trace context goes with the command (see TraceParent).
	tc := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, tc)
	row := tx.QueryRow(ctx, `
		INSERT INTO commands (device_id, site, generation, desired, actor, reason, source, traceparent, tracestate)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		RETURNING `+commandColumns, deviceID, site, gen, string(desired), actor, reason, source, tc.Get("traceparent"), tc.Get("tracestate"))
	cmd, err := scanCommand(row)
	if err != nil {
		return Command{}, fmt.Errorf("insert command: %w", err)
	}
	_, err = tx.Exec(ctx, `
		INSERT INTO impairment_history (device_id, desired, generation, actor, reason, source, command_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, deviceID, string(desired), gen, actor, reason, source, cmd.ID)
	if err != nil {
		return Command{}, fmt.Errorf("append impairment history: %w", err)
	}
	conds, err := loadConditions(ctx, tx, []string{deviceID})
	if err != nil {
		return Command{}, err
	}
	if _, err := s.recomputeDevices(ctx, tx, []string{deviceID}, conds); err != nil {
		return Command{}, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, NotifyChannel, site); err != nil {
		return Command{}, fmt.Errorf("notify site %q: %w", site, err)
	}
	return cmd, nil
}

const commandColumns = `id::text, device_id::text, site, generation, desired, state, actor, reason, source,
	attempts, last_error, result_detail, created_at, updated_at, completed_at, failure_class, failure_reason,
	traceparent, tracestate`

const commandColumnsC = `c.id::text, c.device_id::text, c.site, c.generation, c.desired, c.state, c.actor, c.reason, c.source,
	c.attempts, c.last_error, c.result_detail, c.created_at, c.updated_at, c.completed_at, c.failure_class, c.failure_reason,
	c.traceparent, c.tracestate`

func scanCommand(r pgx.Row) (Command, error) {
	var c Command
	var desired, state, class string
	err := r.Scan(&c.ID, &c.DeviceID, &c.Site, &c.Generation, &desired, &state, &c.Actor, &c.Reason, &c.Source,
		&c.Attempts, &c.LastError, &c.ResultDetail, &c.CreatedAt, &c.UpdatedAt, &c.CompletedAt, &class, &c.FailureReason,
		&c.TraceParent, &c.TraceState)
	c.Desired, c.State, c.FailureClass = Impairment(desired), CommandState(state), FailureClass(class)
	return c, err
}

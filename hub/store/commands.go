package store

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// DeliveryPolicy says when an unfinished command goes out again.
type DeliveryPolicy struct {
	// ResendAfter: a SENT command without a result is sent again after this long.
	ResendAfter time.Duration
	// FailureBackoff: a FAILED command waits min(FailureBackoff·2^(attempts-1), MaxFailureBackoff).
	FailureBackoff, MaxFailureBackoff time.Duration
}

// DueCommands returns the commands of site that the link with epoch should
// send now (none when a newer link holds the site): the
// current generation of each device's desired state when it is PENDING, SENT
// longer than p.ResendAfter ago (or resend is true: the link just started),
// or FAILED and past its backoff — unless the failure is PERMANENT: that
// one waits for a newer desired state or RetryCommand. Oldest first, at
// most limit.
func (s *Store) DueCommands(ctx context.Context, site string, epoch int64, p DeliveryPolicy, resend bool, limit int) ([]Command, error) {
	rows, err := s.commandPool().Query(ctx, `
		SELECT `+commandColumnsC+`
		FROM commands c
		JOIN devices d ON d.id = c.device_id AND d.desired_generation = c.generation
		JOIN sites s ON s.name = c.site AND s.link_epoch = $7
		WHERE c.site = $1 AND `+dueCommand+`
		ORDER BY c.created_at LIMIT $6`,
		site, resend, p.ResendAfter.Seconds(), p.FailureBackoff.Seconds(), p.MaxFailureBackoff.Seconds(), limit, epoch)
	if err != nil {
		return nil, fmt.Errorf("due commands of site %q: %w", site, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Command, error) { return scanCommand(r) })
}

// dueCommand is the condition under which command c (joined with its
// device d) is due, for DueCommands and DueSites: $2 resend, $3
// ResendAfter, $4 FailureBackoff, $5 MaxFailureBackoff (seconds).
const dueCommand = `(
			c.state = 'PENDING'
			OR (c.state = 'SENT' AND ($2 OR c.sent_at < now() - make_interval(secs => $3)))
			OR (c.state = 'FAILED' AND c.failure_class <> 'PERMANENT' AND c.updated_at < now() - make_interval(secs =>
				LEAST($5::float8, $4::float8 * power(2, GREATEST(c.attempts - 1, 0))))))`

// DueSites returns the sites that have a command DueCommands would return
// now under p (resend false), whatever their link: one query for a
// replica's command sweep instead of one per link (the links of these
// sites then read their commands with DueCommands, under their epoch).
func (s *Store) DueSites(ctx context.Context, p DeliveryPolicy) ([]string, error) {
	rows, err := s.commandPool().Query(ctx, `
		SELECT DISTINCT c.site FROM commands c
		JOIN devices d ON d.id = c.device_id AND d.desired_generation = c.generation
		WHERE c.state IN ('PENDING', 'SENT', 'FAILED') AND $1::text IS NULL AND `+dueCommand, // $1 unused: dueCommand numbers from $2
		nil, false, p.ResendAfter.Seconds(), p.FailureBackoff.Seconds(), p.MaxFailureBackoff.Seconds())
	if err != nil {
		return nil, fmt.Errorf("sites with due commands: %w", err)
	}
	sites, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("sites with due commands: %w", err)
	}
	return sites, nil
}

// MarkSent records that command id was sent (attempts+1, state SENT) unless
// it has finished meanwhile.
func (s *Store) MarkSent(ctx context.Context, id string) error {
	_, err := s.commandPool().Exec(ctx, `
		UPDATE commands SET state = 'SENT', attempts = attempts + 1, sent_at = now(), updated_at = now()
		WHERE id = $1 AND state IN ('PENDING', 'SENT', 'FAILED')`, id)
	if err != nil {
		return fmt.Errorf("mark command %s sent: %w", id, err)
	}
	return nil
}

// CommandResult is a site's report on one command.
type CommandResult struct {
	CommandID  string
	DeviceID   string
	Generation int64
	Success    bool
	Error      string
	Detail     string
	// FailureClass and FailureReason classify Error (ignored on success):
	// FailurePermanent stops the resends until a newer desired state or
	// RetryCommand.
	FailureClass  FailureClass
	FailureReason string
}

// RecordResult stores a site's result for a command. A result for a
// generation that is no longer the device's desired generation, or for a
// command already finished, is ignored (ignored=true). The result changes
// only the command and the command's own device.
//
// Errors (nothing is written): ErrNotFound for an unknown command;
// ErrWrongSite when the command, or the device the result names, belongs to
// another site; ErrMismatch when the result names a device of this site
// (or an unknown one) that is not the command's.
func (s *Store) RecordResult(ctx context.Context, site string, r CommandResult) (ignored bool, err error) {
	err = s.inTxOn(ctx, s.commandPool(), func(tx pgx.Tx) error {
		var cmdSite, state, cmdDevice string
		var gen, desiredGen int64
		// Lock order everywhere: device row, then command rows (as
		// SetDesiredImpairment does), so the two cannot deadlock.
		err := tx.QueryRow(ctx, `
			SELECT d.desired_generation, d.id::text FROM devices d
			WHERE d.id = (SELECT device_id FROM commands WHERE id = $1) FOR UPDATE`, r.CommandID).Scan(&desiredGen, &cmdDevice)
		if err == nil {
			err = tx.QueryRow(ctx, `SELECT site, state, generation FROM commands WHERE id = $1 FOR UPDATE`,
				r.CommandID).Scan(&cmdSite, &state, &gen)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("command %s: %w", r.CommandID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("load command %s: %w", r.CommandID, err)
		}
		if cmdSite != site {
			return fmt.Errorf("command %s is for site %q: %w", r.CommandID, cmdSite, ErrWrongSite)
		}
		if r.DeviceID != cmdDevice {
			var devSite string
			err := tx.QueryRow(ctx, `SELECT site FROM devices WHERE id = $1`, r.DeviceID).Scan(&devSite)
			switch {
			case err == nil && devSite != site:
				return fmt.Errorf("device %s is registered to site %q: %w", r.DeviceID, devSite, ErrWrongSite)
			case err != nil && !errors.Is(err, pgx.ErrNoRows):
				return fmt.Errorf("load device %s: %w", r.DeviceID, err)
			}
			return fmt.Errorf("command %s is for device %s, not %s: %w", r.CommandID, cmdDevice, r.DeviceID, ErrMismatch)
		}
		if gen != r.Generation || gen != desiredGen || state == string(CommandSucceeded) || state == string(CommandSuperseded) {
			ignored = true
			return nil
		}
		if r.Success {
			_, err = tx.Exec(ctx, `UPDATE commands SET state = 'SUCCEEDED', last_error = '', result_detail = $2,
				failure_class = '', failure_reason = '', updated_at = now(), completed_at = now() WHERE id = $1`, r.CommandID, r.Detail)
			if err == nil {
				_, err = tx.Exec(ctx, `UPDATE devices SET applied_generation = GREATEST(applied_generation, $2),
					last_command_error = '', last_command_failure_class = '', last_command_failure_reason = '' WHERE id = $1`, cmdDevice, gen)
			}
		} else {
			class := r.FailureClass
			if !class.Valid() {
				class = FailureUnclassified
			}
			_, err = tx.Exec(ctx, `UPDATE commands SET state = 'FAILED', last_error = $2, result_detail = $3,
				failure_class = $4, failure_reason = $5, updated_at = now() WHERE id = $1`, r.CommandID, r.Error, r.Detail, string(class), r.FailureReason)
			if err == nil {
				_, err = tx.Exec(ctx, `UPDATE devices SET last_command_error = $2, last_command_failure_class = $3,
					last_command_failure_reason = $4 WHERE id = $1`, cmdDevice, r.Error, string(class), r.FailureReason)
			}
		}
		if err != nil {
			return fmt.Errorf("record result of command %s: %w", r.CommandID, err)
		}
		return nil
	})
	return ignored, err
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

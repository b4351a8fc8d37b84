package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The link's side of commands: which are due for a site (DueCommands,
// DueSites), sent (MarkSent), and the results satellites report
// (RecordResult). commands.go holds the operator's side.

// DeliveryPolicy says when an unfinished command goes out again.
type DeliveryPolicy struct {
	// ResendAfter: a SENT command without a result is sent again after this long.
	ResendAfter time.Duration
	// FailureBackoff: a FAILED command waits min(FailureBackoff·2^(failures-1), MaxFailureBackoff)
	// after its last failure, failures counting its FAILED results (not its
	// sends: a resend after a link cut does not lengthen the wait).
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
				LEAST($5::float8, $4::float8 * power(2, GREATEST(c.failures - 1, 0))))))`

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
// Its change-feed hint follows the commit (wakeFeed): the statement does
// not take the NOTIFY lock (migration 00073).
func (s *Store) MarkSent(ctx context.Context, id string) error {
	b := &pgx.Batch{}
	b.Queue(feedNotifyDeferredSQL)
	b.Queue(`
		UPDATE commands SET state = 'SENT', attempts = attempts + 1, sent_at = now(), updated_at = now()
		WHERE id = $1 AND state IN ('PENDING', 'SENT', 'FAILED')`, id)
	// One implicit transaction: the setting holds for the update.
	br := s.commandPool().SendBatch(ctx, b)
	_, err := br.Exec()
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		s.wakeFeed() // the commit may have happened and its answer been lost
		return fmt.Errorf("mark command %s sent: %w", id, err)
	}
	if tag.RowsAffected() > 0 {
		s.wakeFeed()
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
// only the command and the command's own device. The device's columns
// (applied generation, last command error) are written in the same
// transaction unless a condition group holds the device row; then right
// after the commit, even when ctx ends meanwhile (at most followUpTimeout;
// a replica killed in between leaves them as they were until the site's
// link opens again: OpenLink heals them).
//
// Errors (nothing is written): ErrNotFound for an unknown command;
// ErrWrongSite when the command, or the device the result names, belongs to
// another site; ErrMismatch when the result names a device of this site
// (or an unknown one) that is not the command's.
func (s *Store) RecordResult(ctx context.Context, site string, r CommandResult) (ignored bool, err error) {
	var device string
	var gen int64
	var deviceDone bool
	err = s.inTxOn(ctx, s.commandPool(), func(tx pgx.Tx) error {
		var cmdSite, state string
		var desiredGen int64
		// The command row is locked, not the device row: a condition
		// group holds the rows of the devices it writes until it commits,
		// and a result must not wait for that (issue 26 item 1). The
		// command row orders the result against a newer desired state:
		// setDesiredTx supersedes the open commands of the device under
		// their row locks, so either it has (the result sees SUPERSEDED
		// and is ignored) or it waits for this commit (and then finds
		// the command finished). desired_generation is read as committed.
		err := tx.QueryRow(ctx, `
			SELECT c.site, c.state, c.generation, c.device_id::text, d.desired_generation
			FROM commands c JOIN devices d ON d.id = c.device_id
			WHERE c.id = $1 FOR UPDATE OF c`, r.CommandID).Scan(&cmdSite, &state, &gen, &device, &desiredGen)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("command %s: %w", r.CommandID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("load command %s: %w", r.CommandID, err)
		}
		if cmdSite != site {
			return fmt.Errorf("command %s is for site %q: %w", r.CommandID, cmdSite, ErrWrongSite)
		}
		if r.DeviceID != device {
			var devSite string
			err := tx.QueryRow(ctx, `SELECT site FROM devices WHERE id = $1`, r.DeviceID).Scan(&devSite)
			switch {
			case err == nil && devSite != site:
				return fmt.Errorf("device %s is registered to site %q: %w", r.DeviceID, devSite, ErrWrongSite)
			case err != nil && !errors.Is(err, pgx.ErrNoRows):
				return fmt.Errorf("load device %s: %w", r.DeviceID, err)
			}
			return fmt.Errorf("command %s is for device %s, not %s: %w", r.CommandID, device, r.DeviceID, ErrMismatch)
		}
		ignored = gen != r.Generation || gen != desiredGen || state == string(CommandSucceeded) || state == string(CommandSuperseded)
		if ignored {
			return nil
		}
		// The command's update and, when no group holds the device row
		// (SKIP LOCKED: this transaction never waits for it, so it cannot
		// deadlock with a desired-state write, which locks the device
		// first), the device's, in one round trip.
		b := resultBatch(r, device, gen, true)
		br := tx.SendBatch(ctx, b)
		if _, err := br.Exec(); err != nil {
			br.Close()
			return fmt.Errorf("record result of command %s: defer its feed hint: %w", r.CommandID, err)
		}
		if _, err := br.Exec(); err != nil {
			br.Close()
			return fmt.Errorf("record result of command %s: %w", r.CommandID, err)
		}
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return fmt.Errorf("record result of command %s on its device: %w", r.CommandID, err)
		}
		deviceDone = tag.RowsAffected() > 0
		if err := br.Close(); err != nil {
			return fmt.Errorf("record result of command %s: %w", r.CommandID, err)
		}
		return nil
	})
	if err != nil || ignored {
		if err != nil && !refused(err) {
			s.wakeFeed() // the commit may have happened and its answer been lost
		}
		return ignored, err
	}
	s.wakeFeed() // the transaction deferred its change-feed hint
	if deviceDone {
		return false, nil
	}
	// The device row was locked (by a condition group, mostly): the
	// command's outcome is committed and visible; the device's columns
	// follow once the lock is free, on the main pool so that the wait
	// holds no connection of the command path. Its WHERE clauses keep it
	// from overwriting what a newer generation's result wrote meanwhile.
	// Its failure is logged, not returned: the result is recorded, and a
	// resend of it would be ignored. It outlives ctx (a link closed or a
	// replica draining as the lock frees must not leave it undone), up to
	// followUpTimeout; what is left undone even so (a replica killed in
	// between) OpenLink heals when the site's link opens again.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), followUpTimeout)
	defer cancel()
	b := resultBatch(r, device, gen, false)
	if err := s.pool.SendBatch(fctx, b).Close(); err != nil {
		s.log.Warn("command result recorded; its device's applied generation and last error not updated",
			"command_id", r.CommandID, "device_id", device, "generation", gen, "err", err)
	}
	return false, nil
}

// refused reports whether err is one of RecordResult's refusals, decided
// before anything was written (so no commit can have happened): a result
// a hostile or confused satellite repeats costs no feed hint.
func refused(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrWrongSite) || errors.Is(err, ErrMismatch)
}

// followUpTimeout bounds RecordResult's update of a device row that a
// condition group held (10 seconds, well over a group's commit).
const followUpTimeout = 10 * time.Second

// resultBatch queues the updates RecordResult makes for r, a result of
// generation gen for device: with command, the feed hint deferred
// (feedNotifyDeferredSQL), the command SUCCEEDED or FAILED
// and then the device's row only when no other transaction holds its lock
// (SKIP LOCKED); without, the device's row alone (waiting for its lock).
// The device's update sets its applied generation (success) and its last
// command error, cleared on success while gen is still the desired
// generation, set on failure only then and while gen was not applied.
func resultBatch(r CommandResult, device string, gen int64, command bool) *pgx.Batch {
	b := &pgx.Batch{}
	target := "$1"
	if command {
		b.Queue(feedNotifyDeferredSQL) // wakeFeed after the commit
		target = "(SELECT id FROM devices WHERE id = $1 FOR NO KEY UPDATE SKIP LOCKED)"
	}
	if r.Success {
		if command {
			b.Queue(`UPDATE commands SET state = 'SUCCEEDED', last_error = '', result_detail = $2,
			failure_class = '', failure_reason = '', updated_at = now(), completed_at = now() WHERE id = $1`, r.CommandID, r.Detail)
		}
		b.Queue(`UPDATE devices SET applied_generation = GREATEST(applied_generation, $2),
			last_command_error          = CASE WHEN desired_generation = $2 THEN '' ELSE last_command_error END,
			last_command_failure_class  = CASE WHEN desired_generation = $2 THEN '' ELSE last_command_failure_class END,
			last_command_failure_reason = CASE WHEN desired_generation = $2 THEN '' ELSE last_command_failure_reason END
			WHERE id = `+target, device, gen)
		return b
	}
	class := r.FailureClass
	if !class.Valid() {
		class = FailureUnclassified
	}
	if command {
		b.Queue(`UPDATE commands SET state = 'FAILED', last_error = $2, result_detail = $3,
		failure_class = $4, failure_reason = $5, failures = failures + 1, updated_at = now() WHERE id = $1`, r.CommandID, r.Error, r.Detail, string(class), r.FailureReason)
	}
	b.Queue(`UPDATE devices SET last_command_error = $2, last_command_failure_class = $3,
		last_command_failure_reason = $4 WHERE id = `+target+` AND desired_generation = $5 AND applied_generation < $5`,
		device, r.Error, string(class), r.FailureReason, gen)
	return b
}

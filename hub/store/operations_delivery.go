package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The link's side of operations: which to send (DueOperations), sent
// (MarkOperationSent), failed before a satellite took it (FailOperation),
// and what satellites report (RecordOperationProgress). operations.go
// holds the operator's side.

// OperationDelivery says which operations of a site go out and when.
type OperationDelivery struct {
	// PerSiteLimit: at most this many operations RUNNING at a site; PENDING
	// ones beyond wait (queued, oldest first).
	PerSiteLimit int
	// ResendAfter: a RUNNING operation without progress for this long is
	// sent again (attempt+1); each resend without progress in between
	// doubles the wait, up to MaxResendAfter.
	ResendAfter, MaxResendAfter time.Duration
}

// DueOperations returns, for the link of site with epoch (none when a
// newer link holds the site), the operations to send now: RUNNING ones
// that are due (a cancel to send, no delivery or progress for the resend
// wait, or every one when resend is true: the link just started), then
// PENDING ones, oldest first, as many as free slots under p.PerSiteLimit
// allow (more when some are refused by take). It does not change them:
// MarkOperationSent does, per operation. At most limit.
func (s *Store) DueOperations(ctx context.Context, site string, epoch int64, p OperationDelivery, resend bool, limit int) (running, pending []Operation, free int, err error) {
	rows, err := s.pool.Query(ctx, `
		SELECT `+operationColumns+` FROM operations o
		WHERE o.site = $1 AND o.state = 'RUNNING'
		  AND EXISTS (SELECT 1 FROM sites s WHERE s.name = o.site AND s.link_epoch = $2)
		  AND ($3 OR o.sent_at IS NULL OR GREATEST(o.sent_at, o.progress_at) < now() - make_interval(secs =>
			LEAST($5::float8, $4::float8 * power(2, LEAST(GREATEST(o.attempts - o.progress_attempt - 1, 0), 20)))))
		ORDER BY o.created_at LIMIT $6`,
		site, epoch, resend, p.ResendAfter.Seconds(), p.MaxResendAfter.Seconds(), limit)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("due operations of site %q: %w", site, err)
	}
	if running, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Operation, error) { return scanOperation(r) }); err != nil {
		return nil, nil, 0, fmt.Errorf("due operations of site %q: %w", site, err)
	}
	var n int
	err = s.pool.QueryRow(ctx, `SELECT count(*) FROM operations WHERE site = $1 AND state = 'RUNNING'`, site).Scan(&n)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("running operations of site %q: %w", site, err)
	}
	free = max(p.PerSiteLimit-n, 0)
	if free == 0 {
		return running, nil, 0, nil
	}
	rows, err = s.pool.Query(ctx, `
		SELECT `+operationColumns+` FROM operations o
		WHERE o.site = $1 AND o.state = 'PENDING'
		  AND EXISTS (SELECT 1 FROM sites s WHERE s.name = o.site AND s.link_epoch = $2)
		ORDER BY o.created_at, o.id LIMIT $3`, site, epoch, limit)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("pending operations of site %q: %w", site, err)
	}
	if pending, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Operation, error) { return scanOperation(r) }); err != nil {
		return nil, nil, 0, fmt.Errorf("pending operations of site %q: %w", site, err)
	}
	return running, pending, free, nil
}

// MarkOperationSent records a delivery of operation id by the link of site
// with epoch: attempts+1, sent_at now, and PENDING becomes RUNNING (started
// now), all only while the operation is still PENDING or RUNNING and the
// link still holds the site. It returns the operation as updated (its
// Attempts is the attempt to send) and ok=false when it was not (finished
// meanwhile, or the link was fenced): then nothing must be sent.
func (s *Store) MarkOperationSent(ctx context.Context, site string, epoch int64, id string) (Operation, bool, error) {
	var o Operation
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		o, err = scanOperation(tx.QueryRow(ctx, `
			UPDATE operations o SET attempts = attempts + 1, sent_at = now(), updated_at = now(),
				state = 'RUNNING', started_at = coalesce(started_at, now())
			WHERE id = $1 AND site = $2 AND state IN ('PENDING', 'RUNNING')
			  AND EXISTS (SELECT 1 FROM sites s WHERE s.name = o.site AND s.link_epoch = $3)
			RETURNING `+operationColumns, id, site, epoch))
		if err != nil {
			return err
		}
		return notifyOperation(ctx, tx, id)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Operation{}, false, nil
	}
	if err != nil {
		return Operation{}, false, fmt.Errorf("mark operation %s sent: %w", id, err)
	}
	return o, true, nil
}

// FailOperation ends the open operation id as FAILED with errText and
// failureReason (the hub's own verdict, e.g. an ENROL whose credentials are
// gone). No-op for a finished operation.
func (s *Store) FailOperation(ctx context.Context, id, errText, failureReason string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE operations SET state = 'FAILED', last_error = $2, failure_reason = $3,
			cancel_requested = false, updated_at = now(), ended_at = now() WHERE id = $1 AND state IN ('PENDING', 'RUNNING')`,
			id, errText, failureReason)
		if err != nil {
			return fmt.Errorf("fail operation %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		return notifyOperation(ctx, tx, id)
	})
}

// OperationProgress is a satellite's report on one operation.
type OperationProgress struct {
	OperationID string
	Attempt     int32
	// State is RUNNING or a final state.
	State OperationState
	// Steps is the reporting satellite's step list as protojson: it
	// replaces the stored steps of its attempts and later ones, steps of
	// earlier attempts are kept (mergeSteps); empty keeps them all.
	Steps                                     json.RawMessage
	DeviceID, ProvisionState, Error, ServerID string
	FailureReason                             string
	CancelRefused                             bool
}

// ProgressResult says what RecordOperationProgress did.
type ProgressResult struct {
	// Ignored: the progress answered an older attempt than the last
	// delivery, or the operation had already finished; nothing written.
	Ignored bool
	// Why says why it was ignored.
	Why string
	// Operation is the operation after the update (before, when ignored).
	Operation Operation
}

// RecordOperationProgress stores progress p from site's satellite: state,
// steps (those of earlier attempts kept, the rest replaced), provision state, device id (an ENROL's node, once it
// exists), server id, and on FAILED the error. Final states never go
// backwards: progress for a finished operation is ignored, and so is
// progress for an attempt older than the last delivery. A cancel_refused
// clears cancel_requested. Every change is announced on OperationsChannel.
//
// Errors (nothing written): ErrNotFound for an unknown operation;
// ErrWrongSite when it, or the device p names, belongs to another site;
// ErrMismatch when p names a device that is not the operation's.
func (s *Store) RecordOperationProgress(ctx context.Context, site string, p OperationProgress) (ProgressResult, error) {
	var res ProgressResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		res = ProgressResult{}
		o, err := scanOperation(tx.QueryRow(ctx, `SELECT `+operationColumns+` FROM operations WHERE id = $1 FOR UPDATE`, p.OperationID))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("operation %s: %w", p.OperationID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("load operation %s: %w", p.OperationID, err)
		}
		res.Operation = o
		if o.Site != site {
			return fmt.Errorf("operation %s is for site %q: %w", p.OperationID, o.Site, ErrWrongSite)
		}
		switch {
		case o.State.Final():
			res.Ignored, res.Why = true, "operation already "+string(o.State)
			return nil
		case p.Attempt != o.Attempts:
			res.Ignored, res.Why = true, fmt.Sprintf("progress for attempt %d, last delivery is attempt %d", p.Attempt, o.Attempts)
			return nil
		}
		dev := o.DeviceID
		if p.DeviceID != "" && p.DeviceID != o.DeviceID {
			if o.DeviceID != "" || o.Kind != KindEnrol {
				return fmt.Errorf("operation %s is for device %s, not %s: %w", p.OperationID, o.DeviceID, p.DeviceID, ErrMismatch)
			}
			var devSite string
			err := tx.QueryRow(ctx, `SELECT site FROM devices WHERE id = $1`, p.DeviceID).Scan(&devSite)
			switch {
			case err == nil && devSite != site:
				return fmt.Errorf("device %s is registered to site %q: %w", p.DeviceID, devSite, ErrWrongSite)
			case err != nil && !errors.Is(err, pgx.ErrNoRows):
				return fmt.Errorf("load device %s: %w", p.DeviceID, err)
			}
			dev = p.DeviceID
		}
		// A progress without steps (or without a provision state) keeps
		// the stored ones.
		steps := []byte(p.Steps)
		if len(steps) == 0 || string(steps) == "[]" {
			steps = o.Steps
		} else if steps, err = mergeSteps(o.Steps, p.Steps); err != nil {
			return fmt.Errorf("operation %s: %w", p.OperationID, err)
		}
		provision := p.ProvisionState
		if provision == "" {
			provision = o.ProvisionState
		}
		final := p.State.Final()
		var devArg any
		if dev != "" {
			devArg = dev
		}
		errText, reason := o.LastError, o.FailureReason
		if p.State == OperationFailed {
			errText, reason = p.Error, p.FailureReason
		} else if p.State == OperationSucceeded {
			errText, reason = "", ""
		}
		serverID := o.ServerID
		if p.ServerID != "" {
			serverID = p.ServerID
		}
		cancelReq := o.CancelRequested && !p.CancelRefused && !final
		res.Operation, err = scanOperation(tx.QueryRow(ctx, `
			UPDATE operations SET state = $2, steps = $3, device_id = $4, provision_state = $5, server_id = $6,
				last_error = $7, failure_reason = $8, cancel_requested = $9, progress_attempt = $10,
				progress_at = now(), updated_at = now(), started_at = coalesce(started_at, now()),
				ended_at = CASE WHEN $11 THEN now() ELSE ended_at END
			WHERE id = $1 RETURNING `+operationColumns,
			p.OperationID, string(p.State), steps, devArg, provision, serverID, errText, reason, cancelReq, p.Attempt, final))
		if isUniqueViolation(err) {
			// The enrolled node already has another active operation (an
			// ENROL took over an existing node): keep the device unset.
			return fmt.Errorf("operation %s: device %s: %w", p.OperationID, dev, ErrOperationActive)
		}
		if err != nil {
			return fmt.Errorf("record progress of operation %s: %w", p.OperationID, err)
		}
		return notifyOperation(ctx, tx, p.OperationID)
	})
	return res, err
}

// RecentOperations returns the newest operations of device id, at most limit.
func (s *Store) RecentOperations(ctx context.Context, deviceID string, limit int) ([]Operation, error) {
	return s.ListOperations(ctx, OperationFilter{DeviceID: deviceID, Limit: limit})
}

// SiteCapabilities returns the capabilities site's satellite announced in
// its last hello. Errors: ErrNotFound for a site that never linked.
func (s *Store) SiteCapabilities(ctx context.Context, site string) ([]string, error) {
	var caps []string
	err := s.pool.QueryRow(ctx, `SELECT capabilities FROM sites WHERE name = $1`, site).Scan(&caps)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("site %q: %w", site, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("capabilities of site %q: %w", site, err)
	}
	return caps, nil
}

// nullable returns nil (SQL NULL) for "", else s.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

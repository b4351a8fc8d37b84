package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/hub/status"
)

// Quarantine holds and the restoring release (issue 25; described in
// docs/reference/api.md "Quarantine holds and release"). A device is
// quarantined while at least one source holds it: the operators (one hold
// shared by every operator and API client, HolderOperator) or a policy
// rule (PolicyHolder). The first hold records what the quarantine took
// (whether the device was offered to customers, and its status); the
// release of the last hold gives exactly that back.

// HolderOperator is the quarantine hold of operators and API clients.
const HolderOperator = "operator"

// PolicyHolder returns the quarantine hold of policy rule rule:
// "policy:<rule>".
func PolicyHolder(rule string) string { return "policy:" + rule }

// HolderFor returns the hold a quarantine from source takes: the policy's
// rule (PolicyHolder(rule), "policy:unknown" without a rule) for
// SourcePolicy, else HolderOperator.
func HolderFor(source, rule string) string {
	if source != SourcePolicy {
		return HolderOperator
	}
	if rule == "" {
		rule = "unknown"
	}
	return PolicyHolder(rule)
}

// Action is what a command or impairment history entry did.
type Action string

// Actions.
const (
	// ActionQuarantine added (or renewed) a hold.
	ActionQuarantine Action = "QUARANTINE"
	// ActionRelease released one hold (the device stays quarantined while
	// another remains).
	ActionRelease Action = "RELEASE"
	// ActionReleaseAllHolds released every hold at once.
	ActionReleaseAllHolds Action = "RELEASE_ALL_HOLDS"
	// ActionOffer offered a device that holds no quarantine to customers.
	ActionOffer Action = "OFFER"
)

// ImpairmentAction is who asks for a quarantine, release or offer, why
// and from where, and what it does (Action, Holder: set by the store).
type ImpairmentAction struct {
	Action                Action
	Holder                string
	Actor, Reason, Source string
}

func (a ImpairmentAction) with(act Action, holder string) ImpairmentAction {
	a.Action, a.Holder = act, holder
	return a
}

// QuarantineHold is one source keeping a device quarantined.
type QuarantineHold struct {
	DeviceID, Holder      string
	Actor, Reason, Source string
	// Generation is the desired generation of the quarantine that added it.
	Generation int64
	CreatedAt  time.Time
}

// ReleaseOutcome is what a release does to one device.
type ReleaseOutcome string

// Release outcomes.
const (
	// ReleaseOffered: the last hold goes; the device was offered before its
	// quarantine, so CUSTOM_CUSTOMER_READY is restored (desired RELEASED).
	ReleaseOffered ReleaseOutcome = "RESTORED_OFFERED"
	// ReleaseUnoffered: the last hold goes; the device was not offered
	// before (or that is not known), so the trait stays absent (desired
	// RELEASED_UNOFFERED).
	ReleaseUnoffered ReleaseOutcome = "RESTORED_NOT_OFFERED"
	// ReleaseStillHeld: the caller's hold goes, another remains: the device
	// stays quarantined.
	ReleaseStillHeld ReleaseOutcome = "STILL_HELD"
	// ReleaseHeldByOthers: the caller holds no quarantine of the device;
	// only other sources do. Nothing is released.
	ReleaseHeldByOthers ReleaseOutcome = "HELD_BY_OTHERS"
	// ReleaseNotQuarantined: no hold; nothing to release.
	ReleaseNotQuarantined ReleaseOutcome = "NOT_QUARANTINED"
)

// ReleasePlan is what a release of one device does, or would do.
type ReleasePlan struct {
	DeviceID, Site, Name string
	Outcome              ReleaseOutcome
	// Released are the holders the release removes; Remaining the holds
	// left after it, by holder.
	Released  []string
	Remaining []QuarantineHold
	// OfferedBefore is whether the device was offered before its
	// quarantine (nil: not known, released as not offered); StatusBefore
	// its operational_status then ("" when not known).
	OfferedBefore *bool
	StatusBefore  status.Status
}

// ErrQuarantined: an offer of a device that holds a quarantine; nothing
// was written. Release it first.
var ErrQuarantined = errors.New("device is quarantined")

// ErrHeldByOthers: a release by a source that holds no quarantine of the
// device while other sources do; nothing was written. The error is a
// *HeldByOthersError.
var ErrHeldByOthers = errors.New("the quarantine is held by other sources")

// HeldByOthersError is ErrHeldByOthers (or ErrQuarantined for an offer)
// with the holds in force.
type HeldByOthersError struct {
	DeviceID string
	Holds    []QuarantineHold
	offer    bool
}

func (e *HeldByOthersError) Error() string {
	names := make([]string, len(e.Holds))
	for i, h := range e.Holds {
		names[i] = h.Holder
	}
	if e.offer {
		return fmt.Sprintf("device %s is quarantined (held by %s): release it before offering it", e.DeviceID, strings.Join(names, ", "))
	}
	return fmt.Sprintf("device %s is held only by %s, not by this caller: release every hold explicitly (all_holds) to end the quarantine",
		e.DeviceID, strings.Join(names, ", "))
}

// Is makes errors.Is true for ErrHeldByOthers (a release) or
// ErrQuarantined (an offer).
func (e *HeldByOthersError) Is(target error) bool {
	return (target == ErrHeldByOthers && !e.offer) || (target == ErrQuarantined && e.offer)
}

// Quarantine adds holder's hold on device deviceID and sets its desired
// state QUARANTINED as SetDesiredImpairment does (a new generation and
// PENDING command with action QUARANTINE, the history entry, the status
// re-derived, the site notified), in one transaction. The first hold of a
// quarantine records what it takes: whether the device is offered (desired
// RELEASED, or CustomerReady True) and its status. A quarantine by a
// holder that holds the device already renews its actor and reason.
// Errors: ErrNotFound; nothing is written on error.
func (s *Store) Quarantine(ctx context.Context, deviceID, holder string, a ImpairmentAction) (Command, error) {
	var cmd Command
	err := s.inTxOn(ctx, s.commandPool(), func(tx pgx.Tx) (err error) {
		cmd, err = s.quarantineTx(ctx, tx, deviceID, holder, a)
		return err
	})
	return cmd, err
}

func (s *Store) quarantineTx(ctx context.Context, tx pgx.Tx, deviceID, holder string, a ImpairmentAction) (Command, error) {
	// One round trip: the device locked, then, when no hold is on it yet,
	// what this quarantine takes: the desired state or, never commanded,
	// the trait as the satellite last saw it; the status (the one before
	// the site went silent for UNREACHABLE).
	b := &pgx.Batch{}
	b.Queue(`SELECT 1 FROM devices d WHERE d.id = $1 FOR NO KEY UPDATE OF d`, deviceID)
	b.Queue(`
		UPDATE devices d SET pre_quarantine_at = now(),
			pre_quarantine_offered = CASE
				WHEN d.desired_impairment = 'RELEASED' THEN true
				WHEN d.desired_impairment = 'QUARANTINED' THEN NULL
				ELSE (SELECT c.status = 'True' FROM device_conditions c WHERE c.device_id = d.id AND c.type = 'CustomerReady' AND c.status <> 'Unknown')
			END,
			pre_quarantine_status = CASE WHEN d.status = 'UNREACHABLE' THEN COALESCE(d.last_known_status, '') ELSE d.status END
		WHERE d.id = $1 AND NOT EXISTS (SELECT 1 FROM quarantine_holds WHERE device_id = d.id)`, deviceID)
	br := tx.SendBatch(ctx, b)
	var one int
	err := br.QueryRow().Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		br.Close()
		return Command{}, fmt.Errorf("device %s: %w", deviceID, ErrNotFound)
	}
	if err != nil {
		br.Close()
		return Command{}, fmt.Errorf("lock device %s: %w", deviceID, err)
	}
	if _, err := br.Exec(); err != nil {
		br.Close()
		return Command{}, fmt.Errorf("record what the quarantine of %s takes: %w", deviceID, err)
	}
	if err := br.Close(); err != nil {
		return Command{}, fmt.Errorf("lock device %s: %w", deviceID, err)
	}
	cmd, err := s.setDesiredTx(ctx, tx, deviceID, ImpairmentQuarantined, a.with(ActionQuarantine, holder))
	if err != nil {
		return Command{}, err
	}
	_, err = tx.Exec(ctx, `
		INSERT INTO quarantine_holds (device_id, holder, actor, reason, source, generation)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (device_id, holder) DO UPDATE SET actor = $3, reason = $4, source = $5`,
		deviceID, holder, a.Actor, a.Reason, a.Source, cmd.Generation)
	if err != nil {
		return Command{}, fmt.Errorf("add quarantine hold %q of %s: %w", holder, deviceID, err)
	}
	return cmd, nil
}

// Release releases holder's hold on device deviceID (all: every hold) and,
// when no hold remains, gives back what the quarantine took: desired
// RELEASED when the device was offered before it, RELEASED_UNOFFERED (the
// trait left absent) when it was not or that is not known. A release that
// leaves another hold records itself with a command that keeps the device
// QUARANTINED (action RELEASE, the holder released). validateOnly plans
// without writing. It returns the plan and the command written (zero for
// ReleaseNotQuarantined and validateOnly).
//
// Errors: ErrNotFound; a *HeldByOthersError (ErrHeldByOthers) when holder
// holds no quarantine of the device and others do. Nothing is written on
// error.
func (s *Store) Release(ctx context.Context, deviceID, holder string, all bool, a ImpairmentAction, validateOnly bool) (ReleasePlan, Command, error) {
	var p ReleasePlan
	var cmd Command
	err := s.inTxOn(ctx, s.commandPool(), func(tx pgx.Tx) (err error) {
		p, cmd, err = s.releaseTx(ctx, tx, deviceID, holder, all, a, validateOnly)
		if err == nil && p.Outcome == ReleaseHeldByOthers {
			err = &HeldByOthersError{DeviceID: deviceID, Holds: p.Remaining}
		}
		return err
	})
	return p, cmd, err
}

// releaseTx is Release inside tx, without the error for
// ReleaseHeldByOthers (the plan says it).
func (s *Store) releaseTx(ctx context.Context, tx pgx.Tx, deviceID, holder string, all bool, a ImpairmentAction, validateOnly bool) (ReleasePlan, Command, error) {
	p, err := planRelease(ctx, tx, deviceID, holder, all, true)
	if err != nil || validateOnly {
		return p, Command{}, err
	}
	act := a.with(ActionRelease, holder)
	if all {
		act = a.with(ActionReleaseAllHolds, "")
	}
	var desired Impairment
	switch p.Outcome {
	case ReleaseNotQuarantined, ReleaseHeldByOthers:
		return p, Command{}, nil
	case ReleaseStillHeld:
		desired = ImpairmentQuarantined
	case ReleaseOffered:
		desired = ImpairmentReleased
	default:
		desired = ImpairmentReleasedUnoffered
	}
	if _, err := tx.Exec(ctx, `DELETE FROM quarantine_holds WHERE device_id = $1 AND holder = ANY($2::text[])`, deviceID, p.Released); err != nil {
		return p, Command{}, fmt.Errorf("release holds of %s: %w", deviceID, err)
	}
	if desired != ImpairmentQuarantined {
		if _, err := tx.Exec(ctx, `UPDATE devices SET pre_quarantine_offered = NULL, pre_quarantine_status = '', pre_quarantine_at = NULL
			WHERE id = $1`, deviceID); err != nil {
			return p, Command{}, fmt.Errorf("clear the quarantine record of %s: %w", deviceID, err)
		}
	}
	cmd, err := s.setDesiredTx(ctx, tx, deviceID, desired, act)
	return p, cmd, err
}

// PlanRelease is what Release(deviceID, holder, all) would do now.
// Read-only. Errors: ErrNotFound.
func (s *Store) PlanRelease(ctx context.Context, deviceID, holder string, all bool) (ReleasePlan, error) {
	var p ReleasePlan
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
		p, err = planRelease(ctx, tx, deviceID, holder, all, false)
		return err
	})
	return p, err
}

// planRelease reads device deviceID's holds and quarantine record (locking
// the device row when lock) and plans a release by holder (all: of every
// hold).
func planRelease(ctx context.Context, tx pgx.Tx, deviceID, holder string, all, lock bool) (ReleasePlan, error) {
	p := ReleasePlan{DeviceID: deviceID}
	q := `SELECT site, name, desired_impairment, pre_quarantine_offered, pre_quarantine_status FROM devices WHERE id = $1`
	if lock {
		q += ` FOR NO KEY UPDATE`
	}
	var desired, before string
	err := tx.QueryRow(ctx, q, deviceID).Scan(&p.Site, &p.Name, &desired, &p.OfferedBefore, &before)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, fmt.Errorf("device %s: %w", deviceID, ErrNotFound)
	}
	if err != nil {
		return p, fmt.Errorf("load device %s: %w", deviceID, err)
	}
	p.StatusBefore = status.Status(before)
	holds, err := deviceHolds(ctx, tx, deviceID)
	if err != nil {
		return p, err
	}
	p.Outcome, p.Released, p.Remaining = planHolds(holds, holder, all, desired == string(ImpairmentQuarantined))
	if p.Outcome == "" {
		p.Outcome = ReleaseUnoffered
		if p.OfferedBefore != nil && *p.OfferedBefore {
			p.Outcome = ReleaseOffered
		}
	}
	return p, nil
}

// planHolds decides a release by holder (all: of every hold) over holds;
// quarantined says the desired state is QUARANTINED. An empty outcome
// means the quarantine ends (restored as it was).
func planHolds(holds []QuarantineHold, holder string, all, quarantined bool) (ReleaseOutcome, []string, []QuarantineHold) {
	if len(holds) == 0 {
		if quarantined {
			return "", []string{}, nil // a quarantine without a record of its source: any release ends it
		}
		return ReleaseNotQuarantined, []string{}, nil
	}
	if all {
		released := make([]string, len(holds))
		for i, h := range holds {
			released[i] = h.Holder
		}
		return "", released, nil
	}
	i := slices.IndexFunc(holds, func(h QuarantineHold) bool { return h.Holder == holder })
	if i < 0 {
		return ReleaseHeldByOthers, []string{}, holds
	}
	rest := slices.Delete(slices.Clone(holds), i, i+1)
	if len(rest) > 0 {
		return ReleaseStillHeld, []string{holder}, rest
	}
	return "", []string{holder}, nil
}

// Offer offers device deviceID to customers: desired RELEASED
// (CUSTOM_CUSTOMER_READY present), recorded as a command with action
// OFFER and its history entry. validateOnly checks without writing.
// Errors: ErrNotFound; a *HeldByOthersError (ErrQuarantined) while the
// device holds a quarantine. Nothing is written on error.
func (s *Store) Offer(ctx context.Context, deviceID string, a ImpairmentAction, validateOnly bool) (Command, error) {
	var cmd Command
	err := s.inTxOn(ctx, s.commandPool(), func(tx pgx.Tx) error {
		var err error
		cmd, err = s.offerTx(ctx, tx, deviceID, a, validateOnly)
		if err == nil {
			err = validationGate(ctx, tx, deviceID) // after the lock offerTx takes
		}
		return err
	})
	return cmd, err
}

// offerTx is Offer in tx without the validation gate (a passing
// validation run offers through it).
func (s *Store) offerTx(ctx context.Context, tx pgx.Tx, deviceID string, a ImpairmentAction, validateOnly bool) (Command, error) {
	var desired string
	err := tx.QueryRow(ctx, `SELECT desired_impairment FROM devices WHERE id = $1 FOR NO KEY UPDATE`, deviceID).Scan(&desired)
	if errors.Is(err, pgx.ErrNoRows) {
		return Command{}, fmt.Errorf("device %s: %w", deviceID, ErrNotFound)
	}
	if err != nil {
		return Command{}, fmt.Errorf("lock device %s: %w", deviceID, err)
	}
	holds, err := deviceHolds(ctx, tx, deviceID)
	if err != nil {
		return Command{}, err
	}
	if len(holds) > 0 || desired == string(ImpairmentQuarantined) {
		return Command{}, &HeldByOthersError{DeviceID: deviceID, Holds: holds, offer: true}
	}
	if validateOnly {
		return Command{}, nil
	}
	return s.setDesiredTx(ctx, tx, deviceID, ImpairmentReleased, a.with(ActionOffer, ""))
}

// Holds returns the quarantine holds of the devices ids by device, each
// device's in holder order; none for empty ids. Read-only.
func (s *Store) Holds(ctx context.Context, ids []string) (map[string][]QuarantineHold, error) {
	out := map[string][]QuarantineHold{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+holdColumns+` FROM quarantine_holds
		WHERE device_id = ANY($1::uuid[]) ORDER BY device_id, holder`, ids)
	if err != nil {
		return nil, fmt.Errorf("quarantine holds: %w", err)
	}
	hs, err := pgx.CollectRows(rows, scanHold)
	if err != nil {
		return nil, fmt.Errorf("quarantine holds: %w", err)
	}
	for _, h := range hs {
		out[h.DeviceID] = append(out[h.DeviceID], h)
	}
	return out, nil
}

const holdColumns = `device_id::text, holder, actor, reason, source, generation, created_at`

func scanHold(r pgx.CollectableRow) (QuarantineHold, error) {
	var h QuarantineHold
	err := r.Scan(&h.DeviceID, &h.Holder, &h.Actor, &h.Reason, &h.Source, &h.Generation, &h.CreatedAt)
	return h, err
}

func deviceHolds(ctx context.Context, tx pgx.Tx, deviceID string) ([]QuarantineHold, error) {
	rows, err := tx.Query(ctx, `SELECT `+holdColumns+` FROM quarantine_holds WHERE device_id = $1 ORDER BY holder`, deviceID)
	if err != nil {
		return nil, fmt.Errorf("quarantine holds of %s: %w", deviceID, err)
	}
	hs, err := pgx.CollectRows(rows, scanHold)
	if err != nil {
		return nil, fmt.Errorf("quarantine holds of %s: %w", deviceID, err)
	}
	return hs, nil
}

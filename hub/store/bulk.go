package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/hub/status"
)

// MaxBulkDevices is the most devices one bulk call acts on.
const MaxBulkDevices = 10000

// DeviceSelector chooses devices that are not removed for a bulk
// quarantine or release (issue 12 item 5). Every field set must match;
// within a slice any value matches.
type DeviceSelector struct {
	// Site, when non-empty, keeps devices of this site.
	Site string
	// Sites, when non-nil, keeps only devices of these sites (an operator
	// bound to sites); an empty non-nil slice keeps none.
	Sites []string
	// Statuses keeps devices with one of these operational statuses.
	Statuses []status.Status
	// Reasons keeps devices with a current condition (any type, any
	// status) whose reason is one of these.
	Reasons []string
	// ResourceClass keeps devices whose facts have this resource class.
	ResourceClass string
	// NameLike keeps devices whose name matches this LIKE pattern
	// (backslash escapes; see GlobToLike).
	NameLike string
	// IDs, when non-nil, keeps only these devices (a hardware facts
	// selector resolved by the caller, the ticked rows of the web view's
	// DeviceSelector.device_ids, or both intersected by the caller); an
	// empty non-nil slice keeps none.
	IDs []string
	// Labels keeps devices carrying every one of these labels (effective
	// labels, docs/reference/labels.md).
	Labels map[string]string
}

// BulkMatch is one device a selector matched.
type BulkMatch struct {
	ID, Site, Name string
	Status         status.Status
}

// BulkRequest is one recorded bulk call.
type BulkRequest struct {
	// ID is the request id every command of the call carries.
	ID      string
	Desired Impairment
	// Selector is the selector as the caller wrote it (for the record).
	Selector              string
	Actor, Reason, Source string
	DeviceCount           int
	CreatedAt             time.Time
	// Holder and AllHolds: for a release, the hold it releases, or every
	// hold (see Release); a quarantine adds HolderFor(Source).
	Holder   string
	AllHolds bool
	// Plans: for a release, what it did to each matched device, in device
	// order (devices it left alone included); set on return.
	Plans []ReleasePlan
}

// ErrCountMismatch: a bulk call's expected count differs from what the
// selector matches now; nothing was written. The error is a
// *CountMismatchError.
var ErrCountMismatch = errors.New("selector matches a different number of devices than expected")

// CountMismatchError is ErrCountMismatch with the counts.
type CountMismatchError struct {
	// Expected is the caller's count; Matched what the selector matches.
	Expected, Matched int
}

func (e *CountMismatchError) Error() string {
	return fmt.Sprintf("the selector matches %d devices, not the expected %d", e.Matched, e.Expected)
}

// Is makes errors.Is(err, ErrCountMismatch) true.
func (e *CountMismatchError) Is(target error) bool { return target == ErrCountMismatch }

// ErrTooManyDevices: a selector matched more than MaxBulkDevices devices.
var ErrTooManyDevices = errors.New("selector matches too many devices")

const bulkMatchSQL = `
	FROM devices d
	WHERE NOT d.removed
	  AND ($1 = '' OR d.site = $1)
	  AND ($2::text[] IS NULL OR d.site = ANY($2::text[]))
	  AND (cardinality($3::text[]) = 0 OR d.status = ANY($3::text[]))
	  AND (cardinality($4::text[]) = 0 OR EXISTS (
	        SELECT 1 FROM device_conditions c WHERE c.device_id = d.id AND c.reason = ANY($4::text[])))
	  AND ($5 = '' OR d.facts->>'resource_class' = $5)
	  AND ($6 = '' OR d.name LIKE $6)
	  AND ($7::uuid[] IS NULL OR d.id = ANY($7::uuid[]))
	  AND ($8::jsonb IS NULL OR ` + labelsExpr + ` @> $8::jsonb)`

func (sel DeviceSelector) args() []any {
	sts := make([]string, len(sel.Statuses))
	for i, s := range sel.Statuses {
		sts[i] = string(s)
	}
	reasons := sel.Reasons
	if reasons == nil {
		reasons = []string{}
	}
	// Labels were checked by the caller: encoding a map[string]string
	// cannot fail.
	lab, _ := labelsArg(sel.Labels)
	return []any{sel.Site, sel.Sites, sts, reasons, sel.ResourceClass, sel.NameLike, sel.IDs, lab}
}

// MatchDevices returns how many devices sel matches and the first limit of
// them in site, name and id order. Read-only.
func (s *Store) MatchDevices(ctx context.Context, sel DeviceSelector, limit int) ([]BulkMatch, int, error) {
	var count int
	if err := s.pool.QueryRow(ctx, `SELECT count(*)`+bulkMatchSQL, sel.args()...).Scan(&count); err != nil {
		return nil, 0, fmt.Errorf("count matching devices: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT d.id::text, d.site, d.name, d.status`+bulkMatchSQL+
		` ORDER BY d.site, d.name, d.id LIMIT $9`, append(sel.args(), limit)...)
	if err != nil {
		return nil, 0, fmt.Errorf("list matching devices: %w", err)
	}
	ms, err := pgx.CollectRows(rows, scanMatch)
	if err != nil {
		return nil, 0, fmt.Errorf("list matching devices: %w", err)
	}
	return ms, count, nil
}

func scanMatch(r pgx.CollectableRow) (BulkMatch, error) {
	var m BulkMatch
	var st string
	err := r.Scan(&m.ID, &m.Site, &m.Name, &st)
	m.Status = status.Status(st)
	return m, err
}

// BulkSetDesiredImpairment sets the desired impairment of every device sel
// matches, in one transaction: it locks the matching devices (site, name,
// id order), refuses when their number is not expected (a
// *CountMismatchError, ErrCountMismatch) or exceeds MaxBulkDevices
// (ErrTooManyDevices), records req (the request id is generated), and then
// does for each device exactly what SetDesiredImpairment does (next
// generation, older open commands SUPERSEDED, a PENDING command, the
// impairment history with req's actor, reason and source, the status
// re-derived, the site notified), each command carrying the request id.
// A release (req.Desired RELEASED) releases req.Holder's hold, or every
// hold with req.AllHolds, of each device as Release does: a device it
// leaves as it is (not quarantined, held by others only) gets no command,
// and req.Plans says what happened to each.
// Nothing is written on error. It returns the recorded request and the
// commands in device order.
func (s *Store) BulkSetDesiredImpairment(ctx context.Context, sel DeviceSelector, expected int, req BulkRequest) (BulkRequest, []Command, error) {
	var out []Command
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = nil
		rows, err := tx.Query(ctx, `SELECT d.id::text, d.site, d.name, d.status`+bulkMatchSQL+
			` ORDER BY d.site, d.name, d.id LIMIT $9 FOR NO KEY UPDATE OF d`, append(sel.args(), MaxBulkDevices+1)...)
		if err != nil {
			return fmt.Errorf("lock matching devices: %w", err)
		}
		ms, err := pgx.CollectRows(rows, scanMatch)
		if err != nil {
			return fmt.Errorf("lock matching devices: %w", err)
		}
		if len(ms) > MaxBulkDevices {
			return fmt.Errorf("more than %d devices: %w", MaxBulkDevices, ErrTooManyDevices)
		}
		if len(ms) != expected {
			return &CountMismatchError{Expected: expected, Matched: len(ms)}
		}
		err = tx.QueryRow(ctx, `
			INSERT INTO bulk_requests (desired, selector, actor, reason, source, device_count)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING id::text, created_at`,
			string(req.Desired), req.Selector, req.Actor, req.Reason, req.Source, len(ms)).Scan(&req.ID, &req.CreatedAt)
		if err != nil {
			return fmt.Errorf("record bulk request: %w", err)
		}
		ids := make([]string, 0, len(ms))
		req.Plans = nil
		act := ImpairmentAction{Actor: req.Actor, Reason: req.Reason, Source: req.Source}
		for _, m := range ms {
			var cmd Command
			if req.Desired == ImpairmentQuarantined {
				cmd, err = s.quarantineTx(ctx, tx, m.ID, HolderFor(req.Source, ""), act)
			} else {
				var p ReleasePlan
				p, cmd, err = s.releaseTx(ctx, tx, m.ID, req.Holder, req.AllHolds, act, false)
				req.Plans = append(req.Plans, p)
			}
			if err != nil {
				return err
			}
			if cmd.ID == "" {
				continue // nothing to release
			}
			out = append(out, cmd)
			ids = append(ids, cmd.ID)
		}
		if _, err := tx.Exec(ctx, `UPDATE commands SET request_id = $1 WHERE id = ANY($2::uuid[])`, req.ID, ids); err != nil {
			return fmt.Errorf("tag commands with request %s: %w", req.ID, err)
		}
		return nil
	})
	if err != nil {
		return BulkRequest{}, nil, err
	}
	req.DeviceCount = len(out)
	return req, out, nil
}

// ReleaseCount is how many devices of a bulk release get one outcome
// (with, for STILL_HELD and HELD_BY_OTHERS, the same remaining holders).
type ReleaseCount struct {
	Outcome ReleaseOutcome
	// Holders are the remaining holds' holders, sorted; empty for the
	// other outcomes.
	Holders []string
	Count   int
}

// CountReleasePlans groups plans by outcome and remaining holders, in
// first-seen order.
func CountReleasePlans(plans []ReleasePlan) []ReleaseCount {
	var out []ReleaseCount
	idx := map[string]int{}
	for _, p := range plans {
		var hs []string
		for _, h := range p.Remaining {
			hs = append(hs, h.Holder)
		}
		key := string(p.Outcome) + "\x00" + strings.Join(hs, "\x00")
		i, ok := idx[key]
		if !ok {
			i = len(out)
			idx[key] = i
			out = append(out, ReleaseCount{Outcome: p.Outcome, Holders: hs})
		}
		out[i].Count++
	}
	return out
}

// PlanBulkRelease is what a bulk release of the devices sel matches by
// holder (all: of every hold) would do now: each device's plan in site,
// name and id order, at most MaxBulkDevices (ErrTooManyDevices beyond).
// Read-only.
func (s *Store) PlanBulkRelease(ctx context.Context, sel DeviceSelector, holder string, all bool) ([]ReleasePlan, error) {
	var plans []ReleasePlan
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		plans = nil
		rows, err := tx.Query(ctx, `SELECT d.id::text, d.site, d.name, d.status`+bulkMatchSQL+
			` ORDER BY d.site, d.name, d.id LIMIT $9`, append(sel.args(), MaxBulkDevices+1)...)
		if err != nil {
			return fmt.Errorf("list matching devices: %w", err)
		}
		ms, err := pgx.CollectRows(rows, scanMatch)
		if err != nil {
			return fmt.Errorf("list matching devices: %w", err)
		}
		if len(ms) > MaxBulkDevices {
			return fmt.Errorf("more than %d devices: %w", MaxBulkDevices, ErrTooManyDevices)
		}
		for _, m := range ms {
			p, err := planRelease(ctx, tx, m.ID, holder, all, false)
			if err != nil {
				return err
			}
			plans = append(plans, p)
		}
		return nil
	})
	return plans, err
}

// GetBulkRequest returns the bulk request id. Errors: ErrNotFound.
func (s *Store) GetBulkRequest(ctx context.Context, id string) (BulkRequest, error) {
	var r BulkRequest
	var desired string
	err := s.pool.QueryRow(ctx, `SELECT id::text, desired, selector, actor, reason, source, device_count, created_at
		FROM bulk_requests WHERE id = $1`, id).Scan(&r.ID, &desired, &r.Selector, &r.Actor, &r.Reason, &r.Source, &r.DeviceCount, &r.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("bulk request %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("get bulk request %s: %w", id, err)
	}
	r.Desired = Impairment(desired)
	return r, nil
}

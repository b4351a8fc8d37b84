package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/internal/condition"
)

// ReplaceSiteConditions makes conds (already validated with
// condition.Condition.ValidateSite, distinct types) the stored set of site
// conditions of site, in one transaction under the link's epoch (the group
// commit's, shared with the other batches and sets waiting: see group.go):
// types in conds are written, stored types missing from conds are deleted.
//
//   - A condition whose status equals the stored one of its type keeps the
//     stored last_transition_time; otherwise the incoming one is stored.
//   - A set whose newest observed time is older than the newest stored one
//     is a replay and is ignored whole (applied is false, nothing changes).
//     Within a set that is applied, a condition older than the stored one of
//     its type keeps the stored row, so no condition moves backwards.
//   - An empty set clears the site's conditions.
//   - A stored observed time more than MaxClockSkew in the future (written
//     before the link clamped satellite clocks) counts as now, so it cannot
//     make every later set look older.
//
// It also records the site as heard from. Errors: ErrFenced (a newer link
// exists; nothing is written), ErrNotFound (no such site), database errors.
func (s *Store) ReplaceSiteConditions(ctx context.Context, site string, epoch int64, conds []condition.Condition) (SiteConditionsResult, error) {
	it := &groupItem{site: site, epoch: epoch, conds: conds}
	if err := s.group.submit(ctx, s, it); err != nil {
		return SiteConditionsResult{}, err
	}
	return it.sres, nil
}

// writeSiteConditions is the write of ReplaceSiteConditions inside tx,
// the site row already locked under the link's epoch and recorded as heard
// from by the group.
func writeSiteConditions(ctx context.Context, tx pgx.Tx, site string, conds []condition.Condition) (SiteConditionsResult, error) {
	var res SiteConditionsResult
	stored, err := loadSiteConditions(ctx, tx, site)
	if err != nil {
		return res, err
	}
	cur := stored[site]
	now := time.Now()
	for i := range cur {
		cur[i].ObservedTime = notFuture(cur[i].ObservedTime, now)
	}
	if len(conds) > 0 && latestObserved(conds).Before(latestObserved(cur)) {
		return res, nil // a replay of an older set
	}
	batch := &pgx.Batch{}
	keep := make([]string, 0, len(conds))
	for _, c := range conds {
		keep = append(keep, string(c.Type))
		old, had := findType(cur, c.Type)
		if had && c.ObservedTime.Before(old.ObservedTime) {
			continue // the stored observation is newer
		}
		if !had || old.Status != c.Status || old.Reason != c.Reason {
			res.Changed = true
		}
		if had && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		batch.Queue(`
			INSERT INTO site_conditions (site, type, status, reason, message, last_transition_time, observed_time, received_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, now())
			ON CONFLICT (site, type) DO UPDATE SET status = $3, reason = $4, message = $5,
				last_transition_time = $6, observed_time = $7,
				received_at = CASE WHEN site_conditions.observed_time < $7 THEN now() ELSE site_conditions.received_at END`,
			site, string(c.Type), string(c.Status), c.Reason, c.Message, c.LastTransitionTime, c.ObservedTime)
	}
	for _, old := range cur {
		if _, kept := findType(conds, old.Type); !kept {
			res.Changed = true // cleared
		}
	}
	batch.Queue(`DELETE FROM site_conditions WHERE site = $1 AND NOT (type = ANY($2::text[]))`, site, keep)
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return SiteConditionsResult{}, fmt.Errorf("write site conditions of %q: %w", site, err)
	}
	res.Applied = true
	return res, nil
}

// SiteConditionsResult says what ReplaceSiteConditions did.
type SiteConditionsResult struct {
	// Applied is false when the set was older than the stored one and was
	// ignored whole.
	Applied bool
	// Changed is true when the applied set added or removed a condition
	// type, or changed the status or reason of one; false when it only
	// refreshed observed times or messages.
	Changed bool
}

// MaxClockSkew is how far in the future a satellite's timestamps may lie
// before the hub treats them as coming from a clock that runs ahead: the
// link clamps such times to its receive time, and the store counts stored
// times beyond it as now.
const MaxClockSkew = time.Minute

// notFuture returns t, or now when t lies more than MaxClockSkew after now.
func notFuture(t, now time.Time) time.Time {
	if t.After(now.Add(MaxClockSkew)) {
		return now
	}
	return t
}

func latestObserved(cs []condition.Condition) time.Time {
	var t time.Time
	for _, c := range cs {
		if c.ObservedTime.After(t) {
			t = c.ObservedTime
		}
	}
	return t
}

func findType(cs []condition.Condition, t condition.Type) (condition.Condition, bool) {
	for _, c := range cs {
		if c.Type == t {
			return c, true
		}
	}
	return condition.Condition{}, false
}

// loadSiteConditions returns the stored site conditions of site (every site
// when site is ""), per site in condition.SiteTypes order (unknown types,
// which validation never lets in, last).
func loadSiteConditions(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, site string) (map[string][]condition.Condition, error) {
	rows, err := q.Query(ctx, `
		SELECT site, type, status, reason, message, last_transition_time, observed_time
		FROM site_conditions WHERE ($1 = '' OR site = $1)
		ORDER BY site, array_position($2::text[], type), type`, site, siteTypeNames())
	if err != nil {
		return nil, fmt.Errorf("load site conditions: %w", err)
	}
	defer rows.Close()
	out := map[string][]condition.Condition{}
	for rows.Next() {
		var name, typ, st string
		var c condition.Condition
		if err := rows.Scan(&name, &typ, &st, &c.Reason, &c.Message, &c.LastTransitionTime, &c.ObservedTime); err != nil {
			return nil, fmt.Errorf("load site conditions: %w", err)
		}
		c.Type, c.Status = condition.Type(typ), condition.Status(st)
		out[name] = append(out[name], c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load site conditions: %w", err)
	}
	return out, nil
}

func siteTypeNames() []string {
	out := make([]string, len(condition.SiteTypes))
	for i, t := range condition.SiteTypes {
		out[i] = string(t)
	}
	return out
}

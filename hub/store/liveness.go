package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Liveness: when each site was last heard from (sites.last_seen_at) and
// whether it is stale (silent for longer than stale_after, its devices
// UNREACHABLE). A replica does not write a heartbeat as it arrives: the link
// server keeps each link's last-seen time in memory and FlushLastSeen
// records them all in one statement per interval; MarkStaleSites is the
// sweep, one statement too.

// LastSeen is one link's liveness report for FlushLastSeen.
type LastSeen struct {
	// Site is the site name.
	Site string
	// Epoch is the link's fencing epoch: a site whose current epoch differs
	// (a newer link exists) is not refreshed.
	Epoch int64
	// Age is how long ago, at the time of the flush, the link was last
	// heard from. An age rather than a wall-clock time, so the replica's
	// clock never enters the database: last_seen_at becomes the database's
	// now() - Age.
	Age time.Duration
}

// FlushResult says what FlushLastSeen did with each report.
type FlushResult struct {
	// Refreshed counts the sites whose last_seen_at was advanced.
	Refreshed int
	// Fenced lists the reports refused because the site's current epoch is
	// another (a newer link exists) or the site is unknown: their links are
	// superseded and should end.
	Fenced []LastSeen
	// Busy lists the reports skipped because another transaction held the
	// site row (a batch commit, which records liveness itself); report
	// them again at the next flush.
	Busy []LastSeen
	// Recovered lists the refreshed sites that were stale and are no longer:
	// their devices' statuses were re-derived (UNREACHABLE → their current
	// status).
	Recovered []string
}

// FlushLastSeen records seen (at most one report per site) in one statement:
// `UPDATE sites … FROM unnest(sites, epochs, ages)` for the rows whose
// link_epoch is the report's epoch, last_seen_at never moving backwards.
// Rows locked by another transaction are skipped, not waited for (no lock
// order to deadlock on with a batch commit that locks several sites), and
// come back in Busy. A stale site that was refreshed has its staleness
// cleared and its devices re-derived (one transaction per such site: rare,
// it takes a site silent for longer than stale_after).
//
// Errors are database errors; on error nothing was recorded.
func (s *Store) FlushLastSeen(ctx context.Context, seen []LastSeen) (FlushResult, error) {
	var res FlushResult
	if len(seen) == 0 {
		return res, nil
	}
	sites := make([]string, len(seen))
	epochs := make([]int64, len(seen))
	ages := make([]float64, len(seen))
	bySite := make(map[string]LastSeen, len(seen))
	for i, l := range seen {
		sites[i], epochs[i], ages[i] = l.Site, l.Epoch, max(l.Age, 0).Seconds()
		bySite[l.Site] = l
	}
	rows, err := s.pool.Query(ctx, `
		WITH seen AS (
			SELECT * FROM unnest($1::text[], $2::bigint[], $3::float8[]) AS t(name, epoch, age)
		), locked AS (
			SELECT s.name FROM sites s JOIN seen ON seen.name = s.name AND seen.epoch = s.link_epoch
			ORDER BY s.name FOR NO KEY UPDATE OF s SKIP LOCKED
		), upd AS (
			UPDATE sites s SET last_seen_at = GREATEST(s.last_seen_at, now() - make_interval(secs => seen.age))
			FROM locked, seen WHERE s.name = locked.name AND seen.name = s.name
			RETURNING s.name, s.stale
		)
		SELECT name, CASE WHEN stale THEN 'stale' ELSE 'ok' END FROM upd
		UNION ALL
		SELECT seen.name, 'fenced' FROM seen LEFT JOIN sites s ON s.name = seen.name
		WHERE s.name IS NULL OR s.link_epoch <> seen.epoch`, sites, epochs, ages)
	if err != nil {
		return FlushResult{}, fmt.Errorf("flush last-seen of %d sites: %w", len(seen), err)
	}
	type outcome struct{ site, what string }
	outs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (outcome, error) {
		var o outcome
		err := r.Scan(&o.site, &o.what)
		return o, err
	})
	if err != nil {
		return FlushResult{}, fmt.Errorf("flush last-seen of %d sites: %w", len(seen), err)
	}
	done := make(map[string]bool, len(outs))
	var stale []string
	for _, o := range outs {
		if done[o.site] {
			continue // refreshed, and fenced since (the epoch check raced a new link)
		}
		done[o.site] = true
		switch o.what {
		case "fenced":
			res.Fenced = append(res.Fenced, bySite[o.site])
		case "stale":
			stale = append(stale, o.site)
			res.Refreshed++
		default:
			res.Refreshed++
		}
	}
	for _, l := range seen {
		if !done[l.Site] {
			res.Busy = append(res.Busy, l)
		}
	}
	for _, site := range stale {
		cleared, err := s.clearStale(ctx, site)
		if err != nil {
			return res, err
		}
		if cleared {
			res.Recovered = append(res.Recovered, site)
		}
	}
	return res, nil
}

// refreshStaleness clears a site's stale flag after it was heard from and
// re-derives its devices' statuses (UNREACHABLE → their current status), in
// one transaction; nothing when the site was not stale.
func (s *Store) refreshStaleness(ctx context.Context, site string) error {
	_, err := s.clearStale(ctx, site)
	return err
}

// clearStale is refreshStaleness, reporting whether the site was stale.
func (s *Store) clearStale(ctx context.Context, site string) (cleared bool, err error) {
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE sites SET stale = false WHERE name = $1 AND stale`, site)
		if err != nil {
			return fmt.Errorf("clear stale flag of site %q: %w", site, err)
		}
		cleared = tag.RowsAffected() > 0
		if !cleared {
			return nil
		}
		_, err = s.recomputeSite(ctx, tx, site, false)
		return err
	})
	return cleared, err
}

// MarkStaleSites flags every site not heard from for longer than staleAfter
// and makes its reported devices UNREACHABLE (reason SiteStale, their last
// status kept in last_known_status, one status_history row each), all in
// one statement: the rule of status.Derive for a stale site, set-based. A
// site whose row another transaction holds (a batch being committed: it is
// not silent) is skipped. It returns the names of the sites it flagged.
func (s *Store) MarkStaleSites(ctx context.Context, staleAfter time.Duration) ([]string, error) {
	rows, err := s.pool.Query(ctx, `
		WITH candidates AS (
			SELECT name FROM sites
			WHERE NOT stale AND last_seen_at < now() - make_interval(secs => $1)
			ORDER BY name FOR NO KEY UPDATE SKIP LOCKED
		), flagged AS (
			UPDATE sites s SET stale = true FROM candidates c
			WHERE s.name = c.name
			RETURNING s.name
		), changed AS (
			UPDATE devices d SET status = 'UNREACHABLE', status_reason = 'SiteStale', status_changed_at = now(),
				last_known_status = d.status
			FROM flagged f
			WHERE d.site = f.name AND d.status <> 'UNREACHABLE'
				AND EXISTS (SELECT 1 FROM device_conditions c WHERE c.device_id = d.id)
			RETURNING d.id
		), history AS (
			INSERT INTO status_history (device_id, status, reason)
			SELECT id, 'UNREACHABLE', 'SiteStale' FROM changed
		)
		SELECT name FROM flagged ORDER BY name`, staleAfter.Seconds())
	if err != nil {
		return nil, fmt.Errorf("mark stale sites: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("mark stale sites: %w", err)
	}
	return names, nil
}

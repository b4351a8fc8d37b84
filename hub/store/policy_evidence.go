package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/internal/condition"
)

// SiteEvidence is what the hub knows about how fresh its view of a site is,
// for the policy's fresh-evidence rule (docs/reference/policy.md "Fresh
// evidence"): liveness, the link, and the satellite's poll marks.
type SiteEvidence struct {
	// Stale is the site's stale flag (UNREACHABLE).
	Stale bool
	// LinkUp is true while a link of the site is open on a replica
	// (sites.link_replica set; CloseLink clears it when the link ends).
	LinkUp bool
	// SnapshotDue is true while the link's satellite is a new process
	// whose snapshot the hub has not applied yet (OpenLink): the stored
	// device conditions are from before it.
	SnapshotDue bool
	// LinkSince is when the current (or last) link came up; LastSeen when
	// the site was last heard from (both the database's clock).
	LinkSince, LastSeen time.Time
	// Polled and Listing are the site conditions InventoryPolled and
	// ListingConsistent, nil when the satellite never reported them.
	Polled, Listing *condition.Condition
	// PolledReceived is when the hub received Polled's observation (the
	// database's clock; zero when unknown): a poll mark received before
	// LinkSince came over a link that has ended since.
	PolledReceived time.Time
}

// evidenceSQL selects a site's SiteEvidence columns from sites s (see
// scanEvidence).
const evidenceSQL = `s.stale, s.link_replica IS NOT NULL, s.snapshot_due, s.link_connected_at, s.last_seen_at,
	ip.status, COALESCE(ip.reason, ''), COALESCE(ip.message, ''), ip.observed_time, ip.received_at,
	lc.status, COALESCE(lc.reason, ''), COALESCE(lc.message, ''), lc.observed_time`

// evidenceJoins joins the two poll conditions of sites s.
const evidenceJoins = `
	LEFT JOIN site_conditions ip ON ip.site = s.name AND ip.type = 'InventoryPolled'
	LEFT JOIN site_conditions lc ON lc.site = s.name AND lc.type = 'ListingConsistent'`

// evidenceDest returns the scan destinations of evidenceSQL and a func
// that fills e from them after the scan.
func evidenceDest(e *SiteEvidence) ([]any, func()) {
	var since, seen *time.Time
	var ipStatus, lcStatus *string
	var ipReason, ipMsg, lcReason, lcMsg string
	var ipAt, ipRecv, lcAt *time.Time
	dest := []any{&e.Stale, &e.LinkUp, &e.SnapshotDue, &since, &seen, &ipStatus, &ipReason, &ipMsg, &ipAt, &ipRecv, &lcStatus, &lcReason, &lcMsg, &lcAt}
	return dest, func() {
		if since != nil {
			e.LinkSince = *since
		}
		if seen != nil {
			e.LastSeen = *seen
		}
		if ipRecv != nil {
			e.PolledReceived = *ipRecv
		}
		mark := func(t condition.Type, st *string, reason, msg string, at *time.Time) *condition.Condition {
			if st == nil {
				return nil
			}
			c := &condition.Condition{Type: t, Status: condition.Status(*st), Reason: reason, Message: msg}
			if at != nil {
				c.ObservedTime = *at
			}
			return c
		}
		e.Polled = mark(condition.InventoryPolled, ipStatus, ipReason, ipMsg, ipAt)
		e.Listing = mark(condition.ListingConsistent, lcStatus, lcReason, lcMsg, lcAt)
	}
}

// lockEvidence reads site's SiteEvidence inside tx, holding the site row
// FOR SHARE until tx ends: a link that ends (CloseLink) or a batch of the
// site waits for tx, so what tx decides on stays true until it commits.
// Errors: ErrNotFound (no such site), database errors.
func lockEvidence(ctx context.Context, tx pgx.Tx, site string) (SiteEvidence, error) {
	var e SiteEvidence
	dest, fill := evidenceDest(&e)
	err := tx.QueryRow(ctx, `SELECT `+evidenceSQL+` FROM sites s`+evidenceJoins+` WHERE s.name = $1 FOR SHARE OF s`, site).Scan(dest...)
	if err == pgx.ErrNoRows {
		return e, fmt.Errorf("site %q: %w", site, ErrNotFound)
	}
	if err != nil {
		return e, fmt.Errorf("site %q evidence: %w", site, err)
	}
	fill()
	return e, nil
}

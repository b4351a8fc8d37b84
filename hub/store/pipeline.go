package store

import (
	"context"

	"github.com/ironlink/ironlink/internal/condition"
)

// Pending is a write handed to the Store's group committer by
// SubmitBatch or SubmitSiteConditions and not yet waited for (issue 11
// item 1: a link hands its queued batches to the committer without waiting
// for the previous one's commit).
type Pending struct {
	it *groupItem
}

// SubmitBatch queues b for site under the link's fencing epoch, as
// ApplyBatch does, and returns at once; Pending.Wait gives its result.
// after is the write the same link submitted before (nil for none): b
// commits in after's group (after it) or in a later one, never before it,
// and fails unwritten (with after's error wrapped) when after failed, so a
// link's writes commit in order and none commits past a refused one — as
// if each were submitted only once the one before it committed. ctx bounds
// the wait for a group; a write whose ctx ended before a group took it is
// not written.
func (s *Store) SubmitBatch(ctx context.Context, site string, epoch int64, b Batch, after *Pending) *Pending {
	it := &groupItem{site: site, epoch: epoch, batch: &b}
	return s.submitAfter(ctx, it, after)
}

// SubmitSiteConditions queues the site-condition set conds for site under
// the link's fencing epoch, as ReplaceSiteConditions does, and returns at
// once; after orders it as for SubmitBatch.
func (s *Store) SubmitSiteConditions(ctx context.Context, site string, epoch int64, conds []condition.Condition, after *Pending) *Pending {
	it := &groupItem{site: site, epoch: epoch, conds: conds}
	return s.submitAfter(ctx, it, after)
}

func (s *Store) submitAfter(ctx context.Context, it *groupItem, after *Pending) *Pending {
	if after != nil && !after.it.finished() {
		it.prev = after.it
	} else if after != nil && after.it.err != nil {
		it.prev = after.it // fails at once in the committer
	}
	s.group.enqueue(ctx, s, it)
	return &Pending{it: it}
}

// Wait waits until the write's group committed (or the write failed) or
// ctx ended, and returns the write's error: its refusal (ErrFenced,
// ErrNotFound, ErrWrongSite), the database error that failed its group, or
// the error of the write submitted before it on the link. When ctx ended
// first the write may still commit: the caller must treat it as unknown.
func (p *Pending) Wait(ctx context.Context) error {
	return p.it.wait(ctx)
}

// BatchResult is the result of a batch submitted by SubmitBatch, valid
// once Wait returned nil.
func (p *Pending) BatchResult() BatchResult { return p.it.bres }

// SiteConditionsResult is the result of a set submitted by
// SubmitSiteConditions, valid once Wait returned nil.
func (p *Pending) SiteConditionsResult() SiteConditionsResult { return p.it.sres }

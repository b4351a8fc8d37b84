package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironlink/ironlink/internal/condition"
)

// Group commit (issue 11 item 1). Every condition batch and site-condition
// set of a replica goes through its Store's group committer: the writes
// waiting when a committer worker becomes free are taken together — one per
// site, in arrival order, at most GroupMaxDevices device updates — and
// committed in one transaction with set-based statements (applyGroup). Each
// caller returns only after the group's transaction committed (or failed).
// There is no timer: under light load a group is the one write that arrived,
// committed at once; under load a group is whatever queued meanwhile.
const (
	// GroupCommitWorkers is how many groups commit concurrently (each on
	// its own pooled connection): while one group's transaction runs, the
	// next gathers and the other worker commits it.
	GroupCommitWorkers = 2
	// GroupMaxDevices bounds the device updates of one group (its first
	// write is always taken, however large).
	GroupMaxDevices = 20000
	// groupTimeout bounds one group's transaction, retries included.
	groupTimeout = 2 * time.Minute
)

// groupItem is one link's write in a group: a condition batch (batch set)
// or a site-condition set (batch nil, conds the set).
type groupItem struct {
	site  string
	epoch int64
	batch *Batch
	conds []condition.Condition
	// ctx is the submitter's: an item whose ctx ended before a worker took
	// it is dropped unwritten.
	ctx  context.Context
	done chan struct{}

	// Results, valid once done is closed: err is the item's own refusal
	// (ErrFenced, ErrNotFound, ErrWrongSite) or the database error that
	// failed its transaction.
	bres BatchResult
	sres SiteConditionsResult
	err  error
}

// devices returns how many device updates the item carries (at least 1).
func (it *groupItem) devices() int {
	if it.batch == nil {
		return 1
	}
	return max(len(it.batch.Devices), 1)
}

// groupCommitter queues the writes of a Store and runs up to
// GroupCommitWorkers workers, started when writes wait and ending when none
// do. Its zero value is ready.
type groupCommitter struct {
	mu      sync.Mutex
	waiting []*groupItem
	running int
	// groups and writes count the transactions committed and the writes
	// they carried (GroupStats).
	groups, writes atomic.Int64
}

// GroupStats counts, since Open, the group transactions this Store
// committed and the writes (condition batches and site-condition sets)
// they carried: writes/groups is the mean group size.
func (s *Store) GroupStats() (groups, writes int64) {
	return s.group.groups.Load(), s.group.writes.Load()
}

// submit queues it and waits until its group committed or ctx ended
// (then the write may still commit: the caller must treat it as unknown, as
// any write whose answer was lost). Results are in it.
func (g *groupCommitter) submit(ctx context.Context, s *Store, it *groupItem) error {
	it.ctx, it.done = ctx, make(chan struct{})
	g.mu.Lock()
	g.waiting = append(g.waiting, it)
	if g.running < GroupCommitWorkers {
		g.running++
		go g.work(s)
	}
	g.mu.Unlock()
	select {
	case <-it.done:
		return it.err
	case <-ctx.Done():
		return fmt.Errorf("commit for site %q: %w", it.site, context.Cause(ctx))
	}
}

// work commits groups until none waits.
func (g *groupCommitter) work(s *Store) {
	for {
		g.mu.Lock()
		group := g.take()
		if len(group) == 0 {
			g.running--
			g.mu.Unlock()
			return
		}
		if len(g.waiting) > 0 && g.running < GroupCommitWorkers {
			// take left the rest for another worker: start it.
			g.running++
			go g.work(s)
		}
		g.mu.Unlock()
		g.commit(s, group)
	}
}

// take removes the next group from waiting (g.mu held): items in arrival
// order, one per site (a later item of a site already in the group waits
// for the next group, so a site's writes stay in order), at most
// 1/GroupCommitWorkers of the device updates waiting (so that the
// workers share a burst: ten snapshot parts waiting make two groups of
// five, committed on two connections at once) and at most
// GroupMaxDevices. The first item is always taken. Items whose ctx ended
// are dropped.
func (g *groupCommitter) take() []*groupItem {
	waiting := 0
	live := g.waiting[:0]
	for _, it := range g.waiting {
		if err := it.ctx.Err(); err != nil {
			it.err = fmt.Errorf("commit for site %q: %w", it.site, err)
			close(it.done)
			continue
		}
		waiting += it.devices()
		live = append(live, it)
	}
	limit := min((waiting+GroupCommitWorkers-1)/GroupCommitWorkers, GroupMaxDevices)
	var group, rest []*groupItem
	sites := map[string]bool{}
	devices := 0
	for _, it := range live {
		if sites[it.site] || (len(group) > 0 && devices+it.devices() > limit) {
			rest = append(rest, it)
			continue
		}
		sites[it.site] = true
		devices += it.devices()
		group = append(group, it)
	}
	clear(g.waiting[len(live):])
	g.waiting = rest
	return group
}

// commit applies group in one transaction. When that transaction fails as
// a whole (a database error no check before writing caught), each item is
// committed alone, so one site's bad write never fails another's.
func (g *groupCommitter) commit(s *Store, group []*groupItem) {
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	err := s.applyGroup(ctx, group)
	if err != nil && len(group) > 1 {
		s.log.Warn("group commit failed; committing its writes one by one", "writes", len(group), "err", err)
		for _, it := range group {
			if err := s.applyGroup(ctx, []*groupItem{it}); err != nil {
				it.err = err
			}
		}
	} else if err != nil {
		group[0].err = err
	} else {
		g.groups.Add(1)
		g.writes.Add(int64(len(group)))
	}
	for _, it := range group {
		close(it.done)
	}
}

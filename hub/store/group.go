package store

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironlink/ironlink/internal/condition"
)

// Group commit (issue 11 item 1). Every condition batch and site-condition
// set of a replica goes through its Store's group committer: the writes
// waiting when a committer worker becomes free are taken together — in
// arrival order, several consecutive writes of a site applied one after
// another against the group's in-memory state, each with its own
// duplicate, sequence and fencing check and its own result, at most
// GroupMaxDevices device updates — and committed in one transaction with
// set-based statements (applyGroup). A link submits its writes without
// waiting for the previous one's commit (SubmitBatch), chained so that none
// commits before, or past the refusal of, the one before it. Each write's
// answer is given only after its group's transaction committed (or failed).
// There is no timer: under light load a group is the one write that arrived,
// committed at once; under load a group is whatever queued meanwhile.
const (
	// GroupCommitWorkers is how many groups commit concurrently (each on
	// its own pooled connection): while one group's transaction runs, the
	// next gathers and the other worker commits it.
	GroupCommitWorkers = 2
	// GroupMaxDevices bounds the device updates of one group (its first
	// write is always taken, however large). A group holds the row locks
	// of every device it updates until it commits, and a quarantine,
	// release or command result of one of those devices waits for them:
	// the bound keeps a group's transaction short so that commands do not
	// queue behind ingest. Measured with test/bench BenchmarkLink (100
	// links, 4 quarantiners, 2-core machine): 20,000 gave groups of up to
	// 2,000 devices and quarantine p99 1.4–1.7 s; 400 gave 0.74–0.84 s at
	// the same ingest ratio (docs/design/performance.md). A snapshot part
	// (500 devices) still commits in one group.
	GroupMaxDevices = 400
	// LightSiteDevices is the most device updates a site may have waiting
	// in the committer and still count as light: a light site's writes
	// are taken before a heavy site's (take), and when every worker is
	// busy they get an express worker of their own, so a site sending its
	// usual trickle never waits behind another site's flood (issue 27
	// deliverable 3; docs/design/performance.md).
	LightSiteDevices = 50
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
	// prev is the write submitted before this one on the same link (nil
	// for none): this one is taken only into prev's group (after it) or
	// once prev committed, and fails without writing when prev failed, so
	// a link's writes commit in order and none commits past a refused one.
	prev *groupItem

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
	// express is 1 while the express worker runs: started when a light
	// site's write arrives and every worker is busy, it takes only light
	// sites' writes and ends when none waits.
	express int
	// siteWaiting is the device updates each site has in waiting.
	siteWaiting map[string]int
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
	g.enqueue(ctx, s, it)
	return it.wait(ctx)
}

// enqueue queues it (results valid once it.done is closed) without waiting.
func (g *groupCommitter) enqueue(ctx context.Context, s *Store, it *groupItem) {
	it.ctx, it.done = ctx, make(chan struct{})
	g.mu.Lock()
	g.waiting = append(g.waiting, it)
	if g.siteWaiting == nil {
		g.siteWaiting = map[string]int{}
	}
	g.siteWaiting[it.site] += it.devices()
	switch {
	case g.running < GroupCommitWorkers:
		g.running++
		go g.work(s, false)
	case g.express == 0 && g.siteWaiting[it.site] <= LightSiteDevices:
		g.express++
		go g.work(s, true)
	}
	g.mu.Unlock()
}

// wait waits until it's group committed or ctx ended, and returns it.err.
func (it *groupItem) wait(ctx context.Context) error {
	select {
	case <-it.done:
		return it.err
	case <-ctx.Done():
		return fmt.Errorf("commit for site %q: %w", it.site, context.Cause(ctx))
	}
}

// finished reports whether it's group committed (or it failed).
func (it *groupItem) finished() bool {
	select {
	case <-it.done:
		return true
	default:
		return false
	}
}

// afterFailed returns the error of an item whose prev failed.
func afterFailed(it *groupItem) error {
	return fmt.Errorf("site %q: write after a failed one not attempted: %w", it.site, it.prev.err)
}

// work commits groups until none waits (express: until no light site's
// write waits).
func (g *groupCommitter) work(s *Store, express bool) {
	for {
		g.mu.Lock()
		group := g.take(express)
		if len(group) == 0 {
			if express {
				g.express--
			} else {
				g.running--
			}
			g.mu.Unlock()
			return
		}
		if len(g.waiting) > 0 && g.running < GroupCommitWorkers {
			// take left the rest for another worker: start it.
			g.running++
			go g.work(s, false)
		}
		g.mu.Unlock()
		g.commit(s, group)
	}
}

// take removes the next group from waiting (g.mu held): the items of
// light sites (at most LightSiteDevices waiting) first, then, unless
// lightOnly, the others, each in arrival order, several of a site in their
// order (an item whose prev, the write
// submitted before it on its link, neither committed nor is in the group
// waits for a later group; one whose prev failed fails unwritten), at most
// 1/GroupCommitWorkers of the device updates waiting (so that the
// workers share a burst: ten snapshot parts waiting make two groups of
// five, committed on two connections at once) and at most
// GroupMaxDevices. Once an item of a site is left waiting, or a final
// snapshot part of it is taken, later items of that site wait too. The
// first item is always taken. Items whose ctx ended are dropped.
func (g *groupCommitter) take(lightOnly bool) []*groupItem {
	waiting := 0
	live := g.waiting[:0]
	for _, it := range g.waiting {
		drop := func(err error) {
			it.err, it.prev = err, nil
			g.unwait(it)
			close(it.done)
		}
		if err := it.ctx.Err(); err != nil {
			drop(fmt.Errorf("commit for site %q: %w", it.site, err))
			continue
		}
		if it.prev != nil && it.prev.finished() && it.prev.err != nil {
			drop(afterFailed(it))
			continue
		}
		waiting += it.devices()
		live = append(live, it)
	}
	clear(g.waiting[len(live):])
	order := make([]*groupItem, 0, len(live))
	for _, it := range live {
		if g.siteWaiting[it.site] <= LightSiteDevices {
			order = append(order, it)
		}
	}
	lightN := len(order)
	for _, it := range live {
		if g.siteWaiting[it.site] > LightSiteDevices {
			order = append(order, it)
		}
	}
	limit := min((waiting+GroupCommitWorkers-1)/GroupCommitWorkers, GroupMaxDevices)
	if lightOnly {
		limit = GroupMaxDevices
	}
	var group, rest []*groupItem
	closed := map[string]bool{}
	in := map[*groupItem]bool{}
	devices := 0
	for i, it := range order {
		if (lightOnly && i >= lightN) || closed[it.site] || (it.prev != nil && !in[it.prev] && !it.prev.finished()) ||
			(len(group) > 0 && devices+it.devices() > limit) {
			closed[it.site] = true
			rest = append(rest, it)
			continue
		}
		in[it] = true
		devices += it.devices()
		group = append(group, it)
		if it.batch != nil && it.batch.endsSnapshot() {
			closed[it.site] = true
		}
	}
	for _, it := range group {
		g.unwait(it)
	}
	g.waiting = rest
	return group
}

// unwait takes it's device updates off its site's waiting count (g.mu
// held).
func (g *groupCommitter) unwait(it *groupItem) {
	if n := g.siteWaiting[it.site] - it.devices(); n > 0 {
		g.siteWaiting[it.site] = n
	} else {
		delete(g.siteWaiting, it.site)
	}
}

// commit applies group in one transaction. When that transaction fails as
// a whole (a database error no check before writing caught), each item is
// committed alone, so one site's bad write never fails another's.
func (g *groupCommitter) commit(s *Store, group []*groupItem) {
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	err := s.applyGroup(ctx, group)
	if err != nil && len(group) > 1 {
		s.groupFailedLog.Log(ctx, s.log, slog.LevelWarn, "group commit failed; committing its writes one by one", "writes", len(group), "err", err)
		for _, it := range group {
			if it.prev != nil && it.prev.err != nil {
				it.err = afterFailed(it)
				continue
			}
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
		it.prev = nil // nothing reads it once done; an old chain is freed
		close(it.done)
	}
}

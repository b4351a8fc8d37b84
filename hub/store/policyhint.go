package store

import (
	"context"
	"sync"
	"time"
)

// policyNotifyDeferredSQL marks a group's transaction so that migration
// 00054's status_history trigger does not notify from it: a transaction
// that notifies holds PostgreSQL's one NOTIFY lock from its commit until
// its commit record is flushed, so every notifying transaction commits
// after the one before it, and a group waiting there keeps its device rows
// locked (a quarantine of one of them waits too). The group sends the hint
// after its commit instead (wakePolicy).
const policyNotifyDeferredSQL = `SELECT set_config('ironlink.policy_notify', 'deferred', true)`

// hintSQL sends a hint (the policy's or the feed's) on channel $1 in a
// transaction of its own that does not wait for its commit record's flush
// (a hint need not survive a crash: the evaluator's interval and the
// watchers' poll are the guarantee), so it holds the NOTIFY lock only for
// the commit itself.
const hintSQL = `SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, '')`

// hintTimeout bounds one hint.
const hintTimeout = 5 * time.Second

// feedNotifyDeferredSQL marks a command delivery's or result's
// transaction so that migration 00073's command_events trigger does not
// notify the change feed from it (the same NOTIFY lock as above: three
// notifying commits per quarantine before); the hub sends the feed hint
// after the commit (wakeFeed).
const feedNotifyDeferredSQL = `SELECT set_config('ironlink.feed_notify', 'deferred', true)`

// notifyHint sends one channel's hints after commits: at most one at a
// time, and one more after it when commits asked meanwhile (they are
// covered by that later hint). Its zero value is ready.
type notifyHint struct {
	mu       sync.Mutex
	inFlight bool
	again    bool
}

// wakePolicy hints the policy evaluators (every replica's, through
// PolicyNotifyChannel) that a committed group wrote a status entering
// FAULTED or MAINTENANCE. It does not wait; a failed hint is logged at
// Debug (the evaluator's interval catches up).
func (s *Store) wakePolicy() { s.sendHint(&s.policyHint, PolicyNotifyChannel) }

// wakeFeed hints the change feed's watchers (every replica's, through
// FeedNotifyChannel) that a committed transaction that deferred its
// notification (feedNotifyDeferredSQL) wrote a command event. It does not
// wait; a failed hint is logged at Debug (a watcher's poll catches up).
func (s *Store) wakeFeed() { s.sendHint(&s.feedHint, FeedNotifyChannel) }

// sendHint sends a hint on channel through h (hintSQL), in the
// background.
func (s *Store) sendHint(h *notifyHint, channel string) {
	h.mu.Lock()
	if h.inFlight {
		h.again = true
		h.mu.Unlock()
		return
	}
	h.inFlight = true
	h.mu.Unlock()
	go func() {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), hintTimeout)
			if _, err := s.pool.Exec(ctx, hintSQL, channel); err != nil {
				s.log.Debug("hint after a commit failed", "channel", channel, "err", err)
			}
			cancel()
			h.mu.Lock()
			if !h.again {
				h.inFlight = false
				h.mu.Unlock()
				return
			}
			h.again = false
			h.mu.Unlock()
		}
	}()
}

// wakesPolicy reports whether status is one whose status_history row wakes
// the policy evaluator (migration 00044's trigger).
func wakesPolicy(status string) bool { return status == "FAULTED" || status == "MAINTENANCE" }

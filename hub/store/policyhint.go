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
// after its commit instead (policyHint).
const policyNotifyDeferredSQL = `SELECT set_config('ironlink.policy_notify', 'deferred', true)`

// policyHintSQL sends the policy hint in a transaction of its own that does
// not wait for its commit record's flush (a hint need not survive a crash:
// the evaluator's interval is the guarantee), so it holds the NOTIFY lock
// only for the commit itself.
const policyHintSQL = `SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, '')`

// policyHintTimeout bounds one hint.
const policyHintTimeout = 5 * time.Second

// policyHint sends PolicyNotifyChannel hints for the group committer: at
// most one at a time, and one more after it when groups asked meanwhile
// (their commits are covered by that later hint). Its zero value is ready.
type policyHint struct {
	mu       sync.Mutex
	inFlight bool
	again    bool
}

// wakePolicy hints the policy evaluators (every replica's, through
// PolicyNotifyChannel) that a committed group wrote a status entering
// FAULTED or MAINTENANCE. It does not wait; a failed hint is logged at
// Debug (the evaluator's interval catches up).
func (s *Store) wakePolicy() {
	h := &s.policyHint
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
			ctx, cancel := context.WithTimeout(context.Background(), policyHintTimeout)
			if _, err := s.pool.Exec(ctx, policyHintSQL, PolicyNotifyChannel); err != nil {
				s.log.Debug("policy hint after a group commit failed", "err", err)
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

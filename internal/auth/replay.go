package auth

import (
	"context"
	"sync"
	"time"
)

// ReplayCache remembers the "jti" (RFC 7519 §4.1.7) of every accepted client
// assertion until it expires, so that a token is accepted at most once
// (RFC 7523 §3 item 7). All hub replicas must share one cache — the hub uses
// the PostgreSQL table of hub/store — or a token replayed to another replica
// would pass.
type ReplayCache interface {
	// Remember records (clientID, jti) as used for ttl from now, measured on
	// the cache's own clock: the caller computes ttl on its clock (the
	// Verifier: exp + leeway − its now, plus a leeway for other replicas'
	// clocks), and the cache stores, compares and purges on one clock (the
	// PostgreSQL cache: the database's now()), so two clocks are never
	// compared. It returns replayed = true when the pair was already
	// recorded and has not expired yet; then nothing changes. An error
	// means the cache could not answer: the caller must refuse the token
	// (fail closed).
	Remember(ctx context.Context, clientID, jti string, ttl time.Duration) (replayed bool, err error)
}

// MemoryReplayCache is a ReplayCache in process memory for tools, tests and a
// single hub replica; safe for concurrent use. Expired entries are dropped
// on later calls, so memory stays proportional to the tokens accepted within
// one maximum lifetime. The zero value is ready to use.
type MemoryReplayCache struct {
	// Now returns the current time (default time.Now).
	Now func() time.Time

	mu        sync.Mutex
	seen      map[replayKey]time.Time
	lastPurge time.Time
}

type replayKey struct{ client, jti string }

// Remember implements ReplayCache. It never returns an error.
func (m *MemoryReplayCache) Remember(_ context.Context, clientID, jti string, ttl time.Duration) (bool, error) {
	now := time.Now()
	if m.Now != nil {
		now = m.Now()
	}
	expires := now.Add(ttl)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil {
		m.seen = map[replayKey]time.Time{}
	}
	if now.Sub(m.lastPurge) >= 10*time.Second {
		for k, exp := range m.seen {
			if !exp.After(now) {
				delete(m.seen, k)
			}
		}
		m.lastPurge = now
	}
	k := replayKey{clientID, jti}
	if exp, ok := m.seen[k]; ok && exp.After(now) {
		return true, nil
	}
	m.seen[k] = expires
	return false, nil
}

// Len returns the number of remembered (clientID, jti) pairs, expired ones
// not yet dropped included.
func (m *MemoryReplayCache) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.seen)
}

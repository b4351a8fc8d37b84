// Package reporterlimit keeps one health reporter from starving the
// others (issue 22 item 7; docs/reference/health.md "Throttling"): every
// reporter (a key: the hub door's client and agent, the satellite door's
// agent) has its own token bucket of events (golang.org/x/time/rate), so a
// flooding reporter is refused while every other one keeps its full rate.
// A batch is taken whole or not at all.
package reporterlimit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// MaxKeys bounds the buckets kept; when it is reached, buckets that are
// full again (their reporter idle: dropping one is the same as making it
// anew) are dropped, at most once per sweepEvery, and a new reporter that
// still finds no room shares one overflow bucket. Drained buckets are
// kept, so a flooder cannot shed its debt by crowding the table.
const MaxKeys = 4096

// sweepEvery bounds the O(MaxKeys) sweeps for idle buckets while the
// table is full.
const sweepEvery = 100 * time.Millisecond

// overflowKey is the bucket of reporters beyond MaxKeys.
const overflowKey = "\x00overflow"

// Limiter holds one bucket per reporter key. The zero Rate limits
// nothing. Safe for concurrent use.
type Limiter struct {
	limit rate.Limit
	burst int

	mu        sync.Mutex
	buckets   map[string]*rate.Limiter
	lastSweep time.Time
}

// New returns a limiter of perSecond events per second per reporter, with
// bursts of burst events (at least 1); perSecond ≤ 0 limits nothing.
func New(perSecond float64, burst int) *Limiter {
	return &Limiter{limit: rate.Limit(perSecond), burst: max(burst, 1), buckets: map[string]*rate.Limiter{}}
}

// Take takes events[key] tokens from each key's bucket at now, all or
// none: it returns ok, or the reporter key that is over its rate and how
// long until its bucket holds what was asked (a count above the burst is
// asked as the burst).
func (l *Limiter) Take(events map[string]int, now time.Time) (ok bool, over string, retryAfter time.Duration) {
	if l == nil || l.limit <= 0 {
		return true, "", 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var taken []*rate.Reservation
	for key, n := range events {
		r := l.bucket(key, now).ReserveN(now, min(n, l.burst))
		if d := r.DelayFrom(now); !r.OK() || d > 0 {
			r.CancelAt(now)
			for _, t := range taken {
				t.CancelAt(now)
			}
			return false, key, d
		}
		taken = append(taken, r)
	}
	return true, "", 0
}

// bucket returns key's bucket, making one (l.mu held).
func (l *Limiter) bucket(key string, now time.Time) *rate.Limiter {
	if b := l.buckets[key]; b != nil {
		return b
	}
	if len(l.buckets) >= MaxKeys && now.Sub(l.lastSweep) >= sweepEvery {
		l.lastSweep = now
		for k, b := range l.buckets {
			if b.TokensAt(now) >= float64(l.burst) {
				delete(l.buckets, k)
			}
		}
	}
	if len(l.buckets) >= MaxKeys {
		key = overflowKey
		if b := l.buckets[key]; b != nil {
			return b
		}
	}
	b := rate.NewLimiter(l.limit, l.burst)
	l.buckets[key] = b
	return b
}

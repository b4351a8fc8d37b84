// Package periodic runs a function on a ticker until a context ends: the
// background loops of both binaries (stale-site sweep, JTI purge, last-seen
// flush, health checks, the satellite's sweeps, the simulator's churn).
package periodic

import (
	"context"
	"time"
)

// Every calls fn every d (a time.Ticker: ticks a slow fn missed are
// dropped) until ctx ends; the first call comes after d. It returns when
// ctx ends, not while fn runs. d must be positive (time.NewTicker panics
// otherwise).
func Every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// NowAndEvery calls fn at once and then every d until ctx ends, as
// [Every] does; fn is not called again once ctx has ended.
func NowAndEvery(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		fn()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

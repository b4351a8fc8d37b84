package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/periodic"
)

// runHealthSweep turns expired health conditions Unknown/Stale every
// interval until ctx ends (store.ExpireHealth; every replica runs it, the
// site locks keep them apart). Errors are logged and retried next tick.
func runHealthSweep(ctx context.Context, st *store.Store, interval time.Duration, log *slog.Logger) {
	periodic.Every(ctx, interval, func() {
		n, err := st.ExpireHealth(ctx, time.Now())
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("health sweep failed", "err", err)
		case n > 0:
			log.Info("health conditions turned stale", "count", n)
		}
	})
}

// Package loggate logs a line that many callers hit at once — every link
// retrying through a database outage — at its own level at most once a
// minute for all of them, and at Debug otherwise, so an outage under N
// links is one line, not N per retry.
package loggate

import (
	"context"
	"log/slog"
	"time"

	"golang.org/x/time/rate"
)

// Interval is how often at most a Gate lets a line through at its level.
const Interval = time.Minute

// Gate is one such line's once-a-minute allowance, safe for concurrent
// use. The zero value is not usable: call New.
type Gate struct{ lim *rate.Limiter }

// New returns a Gate whose first line goes through at its level.
func New() *Gate { return &Gate{lim: rate.NewLimiter(rate.Every(Interval), 1)} }

// Log logs msg with args on log: at level, with " (logged at debug for a
// minute)" appended, when the gate allows one this minute; at Debug
// otherwise.
func (g *Gate) Log(ctx context.Context, log *slog.Logger, level slog.Level, msg string, args ...any) {
	if g.lim.Allow() {
		log.Log(ctx, level, msg+" (logged at debug for a minute)", args...)
		return
	}
	log.Log(ctx, slog.LevelDebug, msg, args...)
}

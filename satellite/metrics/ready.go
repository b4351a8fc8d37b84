package metrics

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ReadyConfig says when the satellite counts as ready (Ready).
type ReadyConfig struct {
	// PollInterval is the agent's poll interval; a poll older than
	// 3 × PollInterval (or none that long after start) means not ready.
	PollInterval time.Duration
	// LinkGrace is how long the hub link may be down (reconnecting with
	// backoff) before the satellite is not ready; default 2 min.
	LinkGrace time.Duration
}

// readiness is the state Ready reads, guarded by Satellite.mu.
type readiness struct {
	cfg           ReadyConfig
	start         time.Time
	lastPoll      time.Time
	linkUp        bool
	linkDownSince time.Time
}

// SetReadiness configures Ready.
func (m *Satellite) SetReadiness(c ReadyConfig) {
	if c.LinkGrace <= 0 {
		c.LinkGrace = 2 * time.Minute
	}
	m.mu.Lock()
	m.ready.cfg = c
	m.mu.Unlock()
}

// Errors of Ready, returned wrapped with detail.
var (
	// ErrLinkDown: the hub link has been down for longer than LinkGrace.
	ErrLinkDown = errors.New("hub link down")
	// ErrPollStale: no poll completed within 3 poll intervals.
	ErrPollStale = errors.New("no recent poll")
)

// Ready returns nil when the satellite is ready at now: the hub link is up
// or has been down for at most LinkGrace (it is retrying with backoff), and
// a poll completed within the last 3 poll intervals (before the first poll:
// within 3 poll intervals of the start). Otherwise an error wrapping
// ErrLinkDown or ErrPollStale (both joined when both hold).
func (m *Satellite) Ready(now time.Time) error {
	m.mu.RLock()
	r := m.ready
	m.mu.RUnlock()
	var errs []error
	if !r.linkUp && r.cfg.LinkGrace > 0 {
		if down := now.Sub(r.linkDownSince); down > r.cfg.LinkGrace {
			errs = append(errs, fmt.Errorf("%w for %s (more than %s)", ErrLinkDown, down.Round(time.Second), r.cfg.LinkGrace))
		}
	}
	if r.cfg.PollInterval > 0 {
		limit := 3 * r.cfg.PollInterval
		switch {
		case r.lastPoll.IsZero() && now.Sub(r.start) > limit:
			errs = append(errs, fmt.Errorf("%w: none completed in the %s since start (see the site condition OpenStackAuthenticated and the log)", ErrPollStale, now.Sub(r.start).Round(time.Second)))
		case !r.lastPoll.IsZero() && now.Sub(r.lastPoll) > limit:
			errs = append(errs, fmt.Errorf("%w: the last completed %s ago (more than %s)", ErrPollStale, now.Sub(r.lastPoll).Round(time.Second), limit))
		}
	}
	return errors.Join(errs...)
}

func (m *Satellite) serveReady(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := m.Ready(time.Now()); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready:", err)
		return
	}
	fmt.Fprintln(w, "ready")
}

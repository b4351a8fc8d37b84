package link

import (
	"context"
	"sync"
	"time"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/periodic"
)

// Liveness without a write per heartbeat: every message a link receives
// records the time in the replica's lastSeen map (one mutex, no database),
// and RunLastSeenFlush writes the whole map in one statement
// (store.FlushLastSeen) every Config.LastSeenFlush.

// seenAt is a link's last-seen record: its epoch and when it was heard.
type seenAt struct {
	epoch int64
	at    time.Time // monotonic: only ever compared with time.Now()
}

// lastSeen holds, per site, the last time one of its links on this replica
// was heard from since the previous flush.
type lastSeen struct {
	mu sync.Mutex
	m  map[string]seenAt
}

// note records that site's link with epoch was heard at at. An older
// epoch never replaces a newer one (a superseded link still draining).
func (l *lastSeen) note(site string, epoch int64, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]seenAt{}
	}
	if cur, ok := l.m[site]; ok && (cur.epoch > epoch || (cur.epoch == epoch && cur.at.After(at))) {
		return
	}
	l.m[site] = seenAt{epoch: epoch, at: at}
}

// take empties the map and returns its records.
func (l *lastSeen) take() map[string]seenAt {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.m
	l.m = nil
	return m
}

// heard records that the link of site with epoch received a message now.
func (s *Server) heard(site string, epoch int64) {
	s.seen.note(site, epoch, time.Now())
}

// RunLastSeenFlush records every link's last-seen time in one statement
// (store.FlushLastSeen) every interval (Config.LastSeenFlush when interval
// is 0) until ctx ends, then once more so the last heartbeats are not lost.
// Reports for sites whose row was busy, and all of them when the database
// failed, are kept for the next flush; a link whose site has a newer epoch
// (a newer link on another replica) is ended as superseded.
func (s *Server) RunLastSeenFlush(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = s.cfg.LastSeenFlush
	}
	periodic.Every(ctx, interval, func() { s.FlushLastSeen(ctx) })
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s.FlushLastSeen(fctx)
}

// FlushLastSeen writes the last-seen records gathered since the previous
// flush (see RunLastSeenFlush); exported for tests that need liveness
// recorded now.
func (s *Server) FlushLastSeen(ctx context.Context) {
	m := s.seen.take()
	if len(m) == 0 {
		return
	}
	now := time.Now()
	reports := make([]store.LastSeen, 0, len(m))
	for site, r := range m {
		reports = append(reports, store.LastSeen{Site: site, Epoch: r.epoch, Age: now.Sub(r.at)})
	}
	res, err := s.store.FlushLastSeen(ctx, reports)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("record last-seen times failed; kept for the next flush", "sites", len(reports), "err", err)
		}
		s.requeue(m, reports)
		return
	}
	s.requeue(m, res.Busy)
	for _, site := range res.Recovered {
		s.log.Info("site reachable again: heard from after being stale", "site", site)
	}
	for _, f := range res.Fenced {
		s.endFenced(f.Site, f.Epoch)
	}
}

// requeue puts the records of reports (taken from m) back for the next
// flush, unless a newer one arrived meanwhile.
func (s *Server) requeue(m map[string]seenAt, reports []store.LastSeen) {
	for _, r := range reports {
		if rec, ok := m[r.Site]; ok {
			s.seen.note(r.Site, rec.epoch, rec.at)
		}
	}
}

// endFenced ends this replica's link of site when it still has epoch: the
// database holds a newer epoch, so a newer link exists elsewhere and this
// one can write nothing any more.
func (s *Server) endFenced(site string, epoch int64) {
	s.mu.Lock()
	c := s.links[site]
	s.mu.Unlock()
	if c != nil && c.epoch == epoch {
		s.log.Info("link fenced by a newer link", "site", site, "epoch", epoch)
		c.cancel(errSuperseded)
	}
}

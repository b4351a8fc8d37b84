package link

import (
	"context"
	"sync"
	"time"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/periodic"
)

// ListenForCommands subscribes to the replica's LISTEN dispatcher
// (store.Notifications) on store.NotifyChannel and wakes the matching link
// for each notification (the payload is the site), until ctx ends; it
// always returns nil. Notifications are hints: each link's command sweep
// (Config.CommandSweep) finds due commands without them.
func (s *Server) ListenForCommands(ctx context.Context) error {
	stop := s.store.Notifications().Subscribe(store.NotifyChannel, s.Wake)
	defer stop()
	<-ctx.Done()
	return nil
}

// RunStaleSweep marks sites silent for longer than staleAfter as stale every
// staleAfter/6 (at least every second) until ctx ends.
func (s *Server) RunStaleSweep(ctx context.Context, staleAfter time.Duration) {
	periodic.Every(ctx, max(staleAfter/6, time.Second), func() {
		sites, err := s.store.MarkStaleSites(ctx, staleAfter)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("stale sweep failed", "err", err)
		}
		for _, site := range sites {
			s.log.Warn("site unreachable: silent for longer than stale_after", "site", site, "stale_after", staleAfter)
		}
	})
}

// dueSites caches the sites with due commands (store.DueSites) for the
// links' sweeps, so a replica asks once per interval for all its links
// rather than once per link: at 10,000 links and a 5 s sweep, 2,000
// queries a second became one every 2.5 s.
type dueSites struct {
	refresh sync.Mutex // held by the one task reading the set anew
	mu      sync.Mutex // guards at and sites; never held across a query
	at      time.Time  // when sites was read; zero: never
	sites   map[string]bool
}

// dueCached answers from the cache alone, without waiting (the link's loop
// calls it): fresh is false when the set is older than CommandSweep/2 (or
// was never read), else due says whether site had a due command.
func (s *Server) dueCached(site string) (fresh, due bool) {
	s.due.mu.Lock()
	defer s.due.mu.Unlock()
	if s.due.at.IsZero() || time.Since(s.due.at) >= s.cfg.CommandSweep/2 {
		return false, false
	}
	return true, s.due.sites[site]
}

// siteHasDue reports whether site had a due command when the replica last
// looked, looking again (one query; other links' sweep tasks wait for it,
// their loops do not) when that was CommandSweep/2 ago or longer. New
// commands do not wait for this: the notification wakes the link, which
// reads its commands at once.
func (s *Server) siteHasDue(ctx context.Context, site string) (bool, error) {
	s.due.refresh.Lock()
	defer s.due.refresh.Unlock()
	if fresh, due := s.dueCached(site); fresh {
		return due, nil
	}
	sites, err := s.store.DueSites(ctx, s.cfg.Delivery)
	if err != nil {
		return false, err
	}
	set := make(map[string]bool, len(sites))
	for _, name := range sites {
		set[name] = true
	}
	s.due.mu.Lock()
	s.due.sites, s.due.at = set, time.Now()
	s.due.mu.Unlock()
	return set[site], nil
}

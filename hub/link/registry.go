package link

import (
	"context"
	"errors"

	"github.com/ironlink/ironlink/internal/auth"
)

// The registry: the links open on this replica, one per site. A new link of
// a site supersedes the old one; Drain and RevokeUnauthorized end links from
// outside. Each is ended by cancelling its context with one of these causes,
// which the link's loop turns into the status the satellite sees.
var (
	// errSuperseded cancels a link that a newer link of the same site replaced.
	errSuperseded = errors.New("superseded by a newer link for the same site")
	// errDraining cancels every link when the replica shuts down.
	errDraining = errors.New("hub replica draining")
	// errRevoked cancels a link whose client lost its place in the roster.
	errRevoked = errors.New("client removed from the roster")
)

// conn is one open link on this replica.
type conn struct {
	site   string
	epoch  int64          // the link's fencing epoch
	id     *auth.Identity // nil without authentication
	wake   chan struct{}
	cancel context.CancelCauseFunc
}

// Wake tells the link of site on this replica, if any, to look for due commands now.
func (s *Server) Wake(site string) {
	s.mu.Lock()
	c := s.links[site]
	s.mu.Unlock()
	if c != nil {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// Drain ends every link on this replica with Unavailable ("draining;
// reconnect"), so satellites move to another replica at once instead of
// waiting for the connection to be cut. New links are refused from now on.
// Nothing is lost: unacked batches are resent and unfinished commands are
// delivered again on the satellites' next links.
func (s *Server) Drain() {
	s.mu.Lock()
	s.draining = true
	links := make([]*conn, 0, len(s.links))
	for _, c := range s.links {
		links = append(links, c)
	}
	s.mu.Unlock()
	for _, c := range links {
		c.cancel(errDraining)
	}
	s.log.Info("draining links", "count", len(links))
}

// RevokeUnauthorized ends every link whose client the roster r no longer
// authorizes to report (removed client, removed key, lost scope or site),
// with Unauthenticated. Healthy links are left alone. Call it after each
// roster reload.
func (s *Server) RevokeUnauthorized(r *auth.Roster) {
	s.mu.Lock()
	var revoke []*conn
	for _, c := range s.links {
		if c.id != nil && !r.StillAuthorized(*c.id, auth.ScopeDeviceConditionCreate) {
			revoke = append(revoke, c)
		}
	}
	s.mu.Unlock()
	for _, c := range revoke {
		s.log.Warn("closing link: client no longer in the roster", "site", c.site, "client_id", c.id.ClientID, "kid", c.id.KeyID)
		c.cancel(errRevoked)
	}
}

// Links returns the number of links open on this replica.
func (s *Server) Links() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.links)
}

// isDraining reports whether Drain was called.
func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// register makes c the site's link on this replica, superseding the one
// before it; false when the replica is draining (c is not registered).
func (s *Server) register(c *conn) bool {
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		return false
	}
	old := s.links[c.site]
	s.links[c.site] = c
	s.mu.Unlock()
	if old != nil {
		old.cancel(errSuperseded)
	}
	return true
}

// unregister removes c unless a newer link of its site replaced it.
func (s *Server) unregister(c *conn) {
	s.mu.Lock()
	if s.links[c.site] == c {
		delete(s.links, c.site)
	}
	s.mu.Unlock()
}

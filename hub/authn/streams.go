package authn

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/auth"
)

// Streams holds the open operator streams (WatchFleet, WatchOperation, any
// server stream but the link, which hub/link revokes itself) with the
// identity each was authenticated with, so that a roster change applies to
// them at once (Reload): a stream whose client, key or scope is gone is
// ended (Unauthenticated or PermissionDenied), and every other stream's
// identity takes the roster's current sites and scopes, which the handlers
// read through FromContext / CallerScope on every pass (so a narrowed
// operator's watch is re-filtered to the sites still allowed). Create it
// with NewStreams; safe for concurrent use.
type Streams struct {
	log  *slog.Logger
	mu   sync.Mutex
	open map[*liveStream]struct{}
}

// liveStream is one open stream: its method and current identity.
type liveStream struct {
	method string
	id     atomic.Pointer[auth.Identity]
	cancel context.CancelCauseFunc
}

type liveKey struct{}

// NewStreams returns an empty registry logging to log.
func NewStreams(log *slog.Logger) *Streams {
	return &Streams{log: log, open: map[*liveStream]struct{}{}}
}

// linkMethod is revoked by hub/link (RevokeUnauthorized), not here.
var linkMethod = "/" + ironlinkv1.LinkService_ServiceDesc.ServiceName + "/Connect"

// Open returns the number of streams registered.
func (s *Streams) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

// StreamInterceptor registers every authenticated stream but the link for
// its life. Install it after StreamInterceptor (it reads the identity that
// one put in the context). When Reload ends a stream, the handler's context
// is cancelled and the caller gets Reload's status, whatever the handler
// returned.
func (s *Streams) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		id, ok := FromContext(ss.Context())
		if !ok || info.FullMethod == linkMethod {
			return handler(srv, ss)
		}
		ctx, cancel := context.WithCancelCause(ss.Context())
		ls := &liveStream{method: info.FullMethod, cancel: cancel}
		ls.id.Store(&id)
		ctx = context.WithValue(ctx, liveKey{}, ls)
		s.mu.Lock()
		s.open[ls] = struct{}{}
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.open, ls)
			s.mu.Unlock()
			cancel(nil)
		}()
		err := handler(srv, &liveServerStream{ServerStream: ss, ctx: ctx})
		if cause := context.Cause(ctx); cause != nil && cause != context.Canceled && ss.Context().Err() == nil {
			return cause
		}
		return err
	}
}

type liveServerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (l *liveServerStream) Context() context.Context { return l.ctx }

// Reload applies roster r to every open stream: ended with Unauthenticated
// when its client or the key it signed with is no longer in r, with
// PermissionDenied when the client lost the method's scope; otherwise its
// identity takes r's sites and scopes. It returns how many streams it
// ended and how many changed sites. Call it from the roster watcher's
// change callback.
func (s *Streams) Reload(r *auth.Roster) (ended, changed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ls := range s.open {
		old := ls.id.Load()
		c := r.Client(old.ClientID)
		var why error
		switch {
		case c == nil:
			why = grpcerr.Unauthenticated(fmt.Sprintf("client %s was removed from the hub's roster", old.ClientID))
		case func() bool { _, ok := c.Key(old.KeyID); return !ok }():
			why = grpcerr.Unauthenticated(fmt.Sprintf("the key %s of client %s was removed from the hub's roster", old.KeyID, old.ClientID))
		default:
			if scope, known := auth.RequiredScope(ls.method); known && !c.HasScope(scope) {
				why = grpcerr.PermissionDenied(grpcerr.ReasonMissingScope, fmt.Sprintf("client %s no longer holds scope %s for %s", old.ClientID, scope, ls.method))
			}
		}
		if why != nil {
			s.log.Warn("stream ended: the roster no longer authorizes it", "client_id", old.ClientID, "method", ls.method, "why", why.Error())
			ls.cancel(why)
			ended++
			continue
		}
		next := *old
		next.Site, next.Sites, next.Scopes = c.Site, slices.Clone(c.Sites), slices.Clone(c.Scopes)
		if !slices.Equal(old.Sites, next.Sites) || (old.Sites == nil) != (next.Sites == nil) {
			s.log.Info("stream re-scoped to the roster's sites", "client_id", old.ClientID, "method", ls.method, "sites_before", old.Sites, "sites", next.Sites)
			changed++
		}
		ls.id.Store(&next)
	}
	return ended, changed
}

package fleet

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc"

	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/grpcerr"
)

// siteScope is which sites the caller of an RPC may read and change: every
// site (no authentication, or an operator whose roster entry lists none),
// or only the listed ones (an operator bound to sites; a satellite, bound
// to its own).
type siteScope struct {
	clientID string
	// sites is nil for every site.
	sites []string
}

// callerScope returns the scope of ctx's authenticated caller.
func callerScope(ctx context.Context) siteScope {
	id, ok := authn.FromContext(ctx)
	switch {
	case !ok:
		return siteScope{clientID: "anonymous"}
	case id.Site != "":
		return siteScope{clientID: id.ClientID, sites: []string{id.Site}}
	}
	return siteScope{clientID: id.ClientID, sites: id.Sites}
}

// bound reports whether the caller is limited to some sites.
func (sc siteScope) bound() bool { return sc.sites != nil }

// allows reports whether the caller may use site.
func (sc siteScope) allows(site string) bool { return !sc.bound() || slices.Contains(sc.sites, site) }

// deny logs the refusal (the audit: client, method, what was named, its
// site) and returns the PermissionDenied the caller gets. what names the
// object as the caller named it ("site x", "device <id>", "command <id>");
// the site of a device or command is logged, never told to the caller.
func (s *Server) deny(ctx context.Context, sc siteScope, what, site string) error {
	method, _ := grpc.Method(ctx)
	s.log.Warn("permission denied: site not among the operator's sites", "client_id", sc.clientID, "method", method,
		"object", what, "site", site, "allowed_sites", sc.sites)
	return grpcerr.PermissionDenied(grpcerr.ReasonWrongSite, fmt.Sprintf("client %s may not use %s: the roster binds the client to other sites", sc.clientID, what))
}

// checkDevice refuses, before anything is written, a device of a site the
// caller may not use. Callers with every site skip the lookup. An unknown
// device is NotFound.
func (s *Server) checkDevice(ctx context.Context, sc siteScope, id string) error {
	if !sc.bound() {
		return nil
	}
	site, err := s.store.DeviceSite(ctx, id)
	if err != nil {
		return s.storeErr(err, "device", id)
	}
	if !sc.allows(site) {
		return s.deny(ctx, sc, "device "+id, site)
	}
	return nil
}

// checkSiteAllowed refuses a site filter naming a site the caller may not use.
func (s *Server) checkSiteAllowed(ctx context.Context, sc siteScope, site string) error {
	if site != "" && !sc.allows(site) {
		return s.deny(ctx, sc, "site "+site, site)
	}
	return nil
}

package authn

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"google.golang.org/grpc"

	"github.com/ironlink/ironlink/hub/grpcerr"
)

// SiteScope is which sites the caller of an RPC may read and change: every
// site (no authentication, or an operator whose roster entry lists none),
// or only the listed ones (an operator bound to sites; a satellite, bound
// to its own). The operator services (hub/fleet, hub/operations) filter
// and refuse by it.
type SiteScope struct {
	// ClientID is the caller's client id, "anonymous" without authentication.
	ClientID string
	// Sites is nil for every site.
	Sites []string
}

// CallerScope returns the scope of ctx's authenticated caller.
func CallerScope(ctx context.Context) SiteScope {
	id, ok := FromContext(ctx)
	switch {
	case !ok:
		return SiteScope{ClientID: "anonymous"}
	case id.Site != "":
		return SiteScope{ClientID: id.ClientID, Sites: []string{id.Site}}
	}
	return SiteScope{ClientID: id.ClientID, Sites: id.Sites}
}

// Bound reports whether the caller is limited to some sites.
func (sc SiteScope) Bound() bool { return sc.Sites != nil }

// Allows reports whether the caller may use site.
func (sc SiteScope) Allows(site string) bool { return !sc.Bound() || slices.Contains(sc.Sites, site) }

// Deny logs the refusal on log (the audit: client, method, what was named,
// its site) and returns the PermissionDenied (reason WRONG_SITE) the caller
// gets. what names the object as the caller named it ("site x", "device
// <id>", "command <id>"); the object's site is logged, never told.
func (sc SiteScope) Deny(ctx context.Context, log *slog.Logger, what, site string) error {
	method, _ := grpc.Method(ctx)
	log.Warn("permission denied: site not among the operator's sites", "client_id", sc.ClientID, "method", method,
		"object", what, "site", site, "allowed_sites", sc.Sites)
	return grpcerr.PermissionDenied(grpcerr.ReasonWrongSite, fmt.Sprintf("client %s may not use %s: the roster binds the client to other sites", sc.ClientID, what))
}

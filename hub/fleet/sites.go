package fleet

import (
	"context"

	"github.com/ironlink/ironlink/hub/authn"
)

// siteScope is the caller's sites (authn.SiteScope).
type siteScope = authn.SiteScope

// callerScope returns the scope of ctx's authenticated caller.
func callerScope(ctx context.Context) siteScope { return authn.CallerScope(ctx) }

// deny logs the refusal and returns PermissionDenied (authn.SiteScope.Deny).
func (s *Server) deny(ctx context.Context, sc siteScope, what, site string) error {
	return sc.Deny(ctx, s.log, what, site)
}

// checkDevice refuses, before anything is written, a device of a site the
// caller may not use. Callers with every site skip the lookup. An unknown
// device is NotFound.
func (s *Server) checkDevice(ctx context.Context, sc siteScope, id string) error {
	if !sc.Bound() {
		return nil
	}
	site, err := s.store.DeviceSite(ctx, id)
	if err != nil {
		return s.storeErr(err, "device", id)
	}
	if !sc.Allows(site) {
		return s.deny(ctx, sc, "device "+id, site)
	}
	return nil
}

// checkSiteAllowed refuses a site filter naming a site the caller may not use.
func (s *Server) checkSiteAllowed(ctx context.Context, sc siteScope, site string) error {
	if site != "" && !sc.Allows(site) {
		return s.deny(ctx, sc, "site "+site, site)
	}
	return nil
}

package web

import (
	"net/http"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/grpcerr"
	hubstatus "github.com/ironlink/ironlink/hub/status"
)

// siteData is the site page: the site as ListSites reports it (link,
// liveness, conditions, policy state), its devices per status, and the
// policy in force there.
type siteData struct {
	siteView
	Counts      []matrixCell
	Statuses    []hubstatus.Status
	Total       int
	Policy      *ironlinkv1.SitePolicy
	ReloadError string
	Pending     []*ironlinkv1.PendingAction
}

// site handles GET /sites/{name}.
func (s *Server) site(w http.ResponseWriter, r *http.Request, id Identity) {
	ctx := apiContext(r.Context(), id)
	name := r.PathValue("name")
	if sc := authn.CallerScope(ctx); !sc.Allows(name) {
		s.apiFail(w, r, sc.Deny(ctx, s.log, "site "+name, name))
		return
	}
	sites, err := decorated(s, ctx, "ListSites", &ironlinkv1.ListSitesRequest{}, s.fleet.ListSites)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	var d siteData
	for _, st := range sites.GetSites() {
		if st.GetName() == name {
			d.siteView = newSiteView(st)
		}
	}
	if d.Site == nil {
		s.apiFail(w, r, grpcerr.NotFound("site", name, ""))
		return
	}
	counts, err := countBySiteStatus(ctx, s.store.Pool(), []string{name})
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	d.Statuses = hubstatus.All
	for _, st := range hubstatus.All {
		c := matrixCell{Href: devicesHref(name, st)}
		for _, n := range counts {
			if n.Status == st {
				c.N += n.N
			}
		}
		d.Total += c.N
		d.Counts = append(d.Counts, c)
	}
	if s.policy != nil {
		p, err := s.policy.GetEffectivePolicy(ctx, &ironlinkv1.GetEffectivePolicyRequest{Site: name})
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		d.Policy, d.ReloadError = p.GetPolicy(), p.GetReloadError()
		pa, err := s.policy.ListPendingActions(ctx, &ironlinkv1.ListPendingActionsRequest{Site: name, PageSize: 20})
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		d.Pending = pa.GetActions()
	}
	s.render(w, r, http.StatusOK, "site", "Site "+name, d)
}

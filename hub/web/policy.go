package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/wire"
)

// The policy page (docs/reference/web.md "Policy"): every site's policy
// state and guard, the policy in force, the decision log and the pending
// actions with approve and reject, through PolicyService's handlers.

type policyData struct {
	Site      string
	States    []*ironlinkv1.SitePolicyState
	Policies  []*ironlinkv1.SitePolicy
	Reload    string
	Decisions []*ironlinkv1.PolicyDecision
	Pending   []*ironlinkv1.PendingAction
	Actions   []option
	DryOnly   bool
	NextHref  string
	CanWrite  bool
}

// maxPoliciesShown bounds the sites whose effective policy the page lists
// without a site filter.
const maxPoliciesShown = 20

// policyPage handles GET /policy: ?site, ?action (repeatable: QUARANTINE,
// PENDING, SKIP, RELEASE), ?dry_run=1, ?page (the decisions' page token).
func (s *Server) policyPage(w http.ResponseWriter, r *http.Request, id Identity) {
	if !s.needPolicy(w, r) {
		return
	}
	ctx := apiContext(r.Context(), id)
	q := r.URL.Query()
	d := policyData{Site: q.Get("site"), DryOnly: q.Get("dry_run") != "", CanWrite: id.CanWrite()}
	states, err := s.policy.ListSitePolicyStates(ctx, &ironlinkv1.ListSitePolicyStatesRequest{Site: d.Site})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	d.States = states.GetStates()
	for i, st := range d.States {
		if i == maxPoliciesShown {
			break
		}
		p, err := s.policy.GetEffectivePolicy(ctx, &ironlinkv1.GetEffectivePolicyRequest{Site: st.GetSite()})
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		d.Policies, d.Reload = append(d.Policies, p.GetPolicy()), p.GetReloadError()
	}
	dreq := &ironlinkv1.ListPolicyDecisionsRequest{Site: d.Site, DryRunOnly: d.DryOnly, PageSize: 50, PageToken: q.Get("page")}
	for n := ironlinkv1.PolicyAction(1); int(n) < len(ironlinkv1.PolicyAction_name); n++ {
		name := wire.EnumName(n, "POLICY_ACTION_")
		sel := hasValue(q["action"], name)
		if sel {
			dreq.Actions = append(dreq.Actions, n)
		}
		d.Actions = append(d.Actions, option{Value: name, Label: strings.ToLower(name), Selected: sel})
	}
	dec, err := s.policy.ListPolicyDecisions(ctx, dreq)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	d.Decisions = dec.GetDecisions()
	if t := dec.GetNextPageToken(); t != "" {
		next := url.Values{}
		for k, vs := range q {
			next[k] = vs
		}
		next.Set("page", t)
		d.NextHref = "/policy?" + next.Encode()
	}
	pa, err := s.policy.ListPendingActions(ctx, &ironlinkv1.ListPendingActionsRequest{Site: d.Site, PageSize: 200})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	d.Pending = pa.GetActions()
	s.render(w, r, http.StatusOK, "policy", "Policy", d)
}

// resolvePending handles POST /policy/pending/{verb} (approve or reject;
// form: id, repeatable, and reason): all or nothing, as the RPCs.
func (s *Server) resolvePending(w http.ResponseWriter, r *http.Request, id Identity) {
	verb := r.PathValue("verb")
	if !s.needPolicy(w, r) || !s.writeForm(w, r, id, verb+" pending actions") {
		return
	}
	var ids []int64
	for _, v := range r.PostForm["id"] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			s.apiFail(w, r, badInput("ids", fmt.Errorf("pending action id %q is not a positive number", v)))
			return
		}
		ids = append(ids, n)
	}
	ctx := apiContext(r.Context(), id)
	reason := r.PostForm.Get("reason")
	var err error
	switch verb {
	case "approve":
		_, err = s.policy.ApprovePendingActions(ctx, &ironlinkv1.ApprovePendingActionsRequest{Ids: ids, Reason: reason})
	case "reject":
		_, err = s.policy.RejectPendingActions(ctx, &ironlinkv1.RejectPendingActionsRequest{Ids: ids, Reason: reason})
	default:
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("%q is neither approve nor reject", verb))
		return
	}
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	s.log.Info("fleet view: pending actions resolved", "client_id", id.ClientID, "verb", verb, "count", len(ids), "via", id.Via)
	to := "/policy"
	if site := r.PostForm.Get("site"); site != "" {
		to += "?site=" + url.QueryEscape(site)
	}
	http.Redirect(w, r, to+"#pending", http.StatusSeeOther)
}

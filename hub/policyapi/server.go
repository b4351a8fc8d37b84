// Package policyapi serves ironlink.v1.PolicyService (the quarantine
// policy's effective policy, decision log, pending actions, guard state and
// device holds) and decorates FleetService answers with the policy fields
// (Site.policy_state, Device.policy_holds) through FleetDecorator. Every
// request is validated before the store is touched: bad input is
// InvalidArgument naming the field (hub/grpcerr) and changes nothing; an
// operator bound to sites sees and changes only those.
package policyapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/pagetoken"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/sitename"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// MaxReasonBytes is the longest reason accepted (as FleetService's).
const MaxReasonBytes = 1024

// MaxIDs is the most pending actions one approve or reject names.
const MaxIDs = 1000

// ReasonNotPending is the ErrorInfo reason of a FailedPrecondition for an
// action that is no longer pending.
const ReasonNotPending = grpcerr.ReasonNotPending

// Source is where the policy in force comes from.
type Source interface {
	// Policy returns the policy file in force.
	Policy() *policy.File
	// LastError says why the newest file was refused (nil when current).
	LastError() error
}

// Server implements ironlinkv1.PolicyServiceServer.
type Server struct {
	ironlinkv1.UnimplementedPolicyServiceServer
	st    Store
	src   Source
	actor func(context.Context) string
	log   *slog.Logger
	now   func() time.Time
	// replayDB is what ReplayPolicy reads (SetReplayDB; nil: Internal).
	replayDB *pgxpool.Pool
}

// NewServer returns the policy API over st and src; actor names the caller
// (nil: "anonymous").
func NewServer(st Store, src Source, actor func(context.Context) string, log *slog.Logger) *Server {
	if actor == nil {
		actor = func(context.Context) string { return "anonymous" }
	}
	return &Server{st: st, src: src, actor: actor, log: log, now: time.Now}
}

// scope is the sites the caller may use: nil for every site.
func scope(ctx context.Context) (client string, sites []string) {
	id, ok := authn.FromContext(ctx)
	switch {
	case !ok:
		return "anonymous", nil
	case id.Site != "":
		return id.ClientID, []string{id.Site}
	}
	return id.ClientID, id.Sites
}

func (s *Server) allowSite(ctx context.Context, site string) error {
	return s.allow(ctx, "site "+site, site)
}

// allow refuses an object of a site the caller may not use
// (authn.SiteScope.Deny: the refusal names the object as the caller named
// it, what, e.g. "device <id>" or "pending action 12"; its site is logged,
// never told).
func (s *Server) allow(ctx context.Context, what, site string) error {
	if sc := authn.CallerScope(ctx); !sc.Allows(site) {
		return sc.Deny(ctx, s.log, what, site)
	}
	return nil
}

func checkSite(field, site string, required bool) error {
	if site == "" {
		if required {
			return grpcerr.InvalidArgument(field, grpcerr.ReasonRequired, field+" is required")
		}
		return nil
	}
	if !sitename.Valid(site) {
		return grpcerr.InvalidArgument(field, grpcerr.ReasonInvalidValue, field+" "+textcheck.Quote(site)+
			" is not a valid site name (lower-case letters, digits and '-', 1-63 bytes)")
	}
	return nil
}

// encodeToken is the page token after row id of the listing req asks for.
func encodeToken(req proto.Message, id int64) string {
	return pagetoken.Encode(req, strconv.FormatInt(id, 10))
}

// decodeToken is the row id in req's page token, 0 for the first page, or
// InvalidArgument (field page_token).
func decodeToken(req proto.Message, tok string) (int64, error) {
	cur, err := pagetoken.Cursor(req, tok)
	if err != nil || cur == "" {
		return 0, err
	}
	id, err := strconv.ParseInt(cur, 10, 64)
	if err != nil || id <= 0 {
		return 0, pagetoken.Malformed()
	}
	return id, nil
}

func (s *Server) storeErr(err error) error {
	gerr := grpcerr.FromStore(err) // store.ErrNotPending: FailedPrecondition, ReasonNotPending
	if codes.Unavailable == statusCode(gerr) {
		s.log.Error("store", "err", err)
	}
	return gerr
}

// GetEffectivePolicy implements PolicyService.GetEffectivePolicy.
func (s *Server) GetEffectivePolicy(ctx context.Context, req *ironlinkv1.GetEffectivePolicyRequest) (*ironlinkv1.GetEffectivePolicyResponse, error) {
	if err := checkSite("site", req.GetSite(), true); err != nil {
		return nil, err
	}
	if err := s.allowSite(ctx, req.GetSite()); err != nil {
		return nil, err
	}
	f := s.src.Policy()
	resp := &ironlinkv1.GetEffectivePolicyResponse{Policy: PolicyToProto(req.GetSite(), f, s.now())}
	if err := s.src.LastError(); err != nil {
		resp.ReloadError = textcheck.Prefix(err.Error(), 4096)
	}
	return resp, nil
}

// PolicyToProto renders the effective policy of site in f; windows are
// marked active at now.
func PolicyToProto(site string, f *policy.File, now time.Time) *ironlinkv1.SitePolicy {
	p := f.Effective(site)
	_, over := f.Sites[site]
	out := &ironlinkv1.SitePolicy{Site: site, Enabled: p.Enabled, DryRun: p.DryRun, Guard: guardToProto(p.Guard), Overridden: over}
	out.Guard.PerLabel = labelGuardsToProto(p.Domains)
	for _, r := range p.Rules {
		pr := &ironlinkv1.PolicyRule{Name: r.Name, Reasons: r.Reasons, HoldDown: durationpb.New(r.HoldDown), DryRun: r.DryRun, Labels: r.Labels}
		for _, st := range r.From {
			pr.FromStatuses = append(pr.FromStatuses, string(st))
		}
		for _, st := range r.To {
			pr.ToStatuses = append(pr.ToStatuses, string(st))
		}
		if r.AutoReleaseAfter > 0 {
			pr.AutoReleaseAfter = durationpb.New(r.AutoReleaseAfter)
		}
		if v := r.Validation; v != nil {
			pr.ValidationChecks = v.Checks
		}
		if h := r.Health; h != nil {
			pr.Health = &ironlinkv1.PolicyHealthMatch{ComponentClasses: h.ComponentClasses, Checks: h.Checks, ErrorCodes: h.ErrorCodes, Fatal: h.Fatal}
			for _, a := range h.RecommendedActions {
				pr.Health.RecommendedActions = append(pr.Health.RecommendedActions, ironlinkv1.HealthRecommendedAction(a))
			}
		}
		out.Rules = append(out.Rules, pr)
	}
	for _, w := range p.MaintenanceWindows {
		pw := &ironlinkv1.MaintenanceWindow{Name: w.Name, StartTime: timestamppb.New(w.Start), EndTime: timestamppb.New(w.End),
			DeviceIds: w.Devices, Active: len(policy.ActiveWindows([]policy.Window{w}, "", now)) > 0}
		if w.Every > 0 {
			pw.Every = durationpb.New(w.Every)
		}
		out.MaintenanceWindows = append(out.MaintenanceWindows, pw)
	}
	return out
}

func guardToProto(g policy.Guard) *ironlinkv1.PolicyGuard {
	return &ironlinkv1.PolicyGuard{MaxDevices: int32(g.MaxDevices), MaxPercent: g.MaxPercent, Window: durationpb.New(g.Window)}
}

var actionNames = map[ironlinkv1.PolicyAction]string{
	ironlinkv1.PolicyAction_POLICY_ACTION_QUARANTINE: "QUARANTINE",
	ironlinkv1.PolicyAction_POLICY_ACTION_PENDING:    "PENDING",
	ironlinkv1.PolicyAction_POLICY_ACTION_SKIP:       "SKIP",
	ironlinkv1.PolicyAction_POLICY_ACTION_RELEASE:    "RELEASE",
}

func actionToProto(a string) ironlinkv1.PolicyAction {
	for k, v := range actionNames {
		if v == a {
			return k
		}
	}
	return ironlinkv1.PolicyAction_POLICY_ACTION_UNSPECIFIED
}

// ListPolicyDecisions implements PolicyService.ListPolicyDecisions.
func (s *Server) ListPolicyDecisions(ctx context.Context, req *ironlinkv1.ListPolicyDecisionsRequest) (*ironlinkv1.ListPolicyDecisionsResponse, error) {
	limit, err := grpcerr.PageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	if err := checkSite("site", req.GetSite(), false); err != nil {
		return nil, err
	}
	f := store.DecisionFilter{Site: req.GetSite(), Limit: limit}
	if req.GetSite() != "" {
		if err := s.allowSite(ctx, req.GetSite()); err != nil {
			return nil, err
		}
	}
	_, f.Sites = scope(ctx)
	if d := req.GetDeviceId(); d != "" {
		id, err := uuid.Parse(d)
		if err != nil {
			return nil, grpcerr.InvalidArgument("device_id", grpcerr.ReasonNotUUID, "device_id "+textcheck.Quote(d)+" is not a UUID")
		}
		f.DeviceID = id.String()
	}
	for i, a := range req.GetActions() {
		name, ok := actionNames[a]
		if !ok {
			return nil, grpcerr.InvalidArgument(fmt.Sprintf("actions[%d]", i), grpcerr.ReasonInvalidValue, fmt.Sprintf("action %v is not a valid filter", a))
		}
		f.Actions = append(f.Actions, name)
	}
	if req.GetDryRunOnly() {
		t := true
		f.DryRun = &t
	}
	if f.Before, err = decodeToken(req, req.GetPageToken()); err != nil {
		return nil, err
	}
	ds, more, err := s.st.ListPolicyDecisions(ctx, f)
	if err != nil {
		return nil, s.storeErr(err)
	}
	if len(ds) == 0 { // a typo in the site is NotFound, also with a page token
		if err := grpcerr.SiteKnown(ctx, s.st, req.GetSite()); err != nil {
			return nil, err
		}
	}
	resp := &ironlinkv1.ListPolicyDecisionsResponse{}
	for _, d := range ds {
		resp.Decisions = append(resp.Decisions, DecisionToProto(d))
	}
	if more {
		resp.NextPageToken = encodeToken(req, ds[len(ds)-1].ID)
	}
	return resp, nil
}

func ts(t *time.Time) *timestamppb.Timestamp {
	if t == nil || t.IsZero() {
		return nil
	}
	return timestamppb.New(*t)
}

// DecisionToProto renders a logged decision.
func DecisionToProto(d store.PolicyDecision) *ironlinkv1.PolicyDecision {
	since := d.Cause.LastTransitionTime
	return &ironlinkv1.PolicyDecision{Id: d.ID, DeviceId: d.DeviceID, Site: d.Site, Action: actionToProto(d.Action), Reason: d.Reason,
		Detail: d.Detail, Rule: d.Rule, DryRun: d.DryRun, FromStatus: d.From, ToStatus: d.To, CauseType: string(d.Cause.Type),
		CauseReason: d.Cause.Reason, CauseMessage: d.Cause.Message, CauseTime: ts(&since), TriggerTime: ts(d.TriggeredAt),
		DecideTime: ts(&d.DecidedAt), WindowCount: int32(d.WindowCount), SiteDeviceCount: int32(d.SiteDevices),
		CommandId: d.CommandID, PendingActionId: d.PendingID, Replica: d.Replica, DeviceName: d.DeviceName}
}

var pendingStates = map[ironlinkv1.PendingActionState]string{
	ironlinkv1.PendingActionState_PENDING_ACTION_STATE_PENDING:  store.PendingOpen,
	ironlinkv1.PendingActionState_PENDING_ACTION_STATE_APPROVED: store.PendingApproved,
	ironlinkv1.PendingActionState_PENDING_ACTION_STATE_REJECTED: store.PendingRejected,
	ironlinkv1.PendingActionState_PENDING_ACTION_STATE_EXPIRED:  store.PendingExpired,
}

// PendingToProto renders a pending action.
func PendingToProto(p store.PendingAction) *ironlinkv1.PendingAction {
	out := &ironlinkv1.PendingAction{Id: p.ID, DecisionId: p.DecisionID, DeviceId: p.DeviceID, DeviceName: p.DeviceName, Site: p.Site,
		Rule: p.Rule, Reason: p.Reason, Detail: p.Detail, CauseType: string(p.Cause.Type), CauseReason: p.Cause.Reason,
		CauseMessage: p.Cause.Message, CauseTime: ts(&p.Cause.LastTransitionTime), CreateTime: ts(&p.CreatedAt),
		ResolveTime: ts(p.ResolvedAt), ResolvedBy: p.ResolvedBy, ResolutionReason: p.ResolutionReason, CommandId: p.CommandID}
	for k, v := range pendingStates {
		if v == p.State {
			out.State = k
		}
	}
	return out
}

// ListPendingActions implements PolicyService.ListPendingActions.
func (s *Server) ListPendingActions(ctx context.Context, req *ironlinkv1.ListPendingActionsRequest) (*ironlinkv1.ListPendingActionsResponse, error) {
	limit, err := grpcerr.PageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	if err := checkSite("site", req.GetSite(), false); err != nil {
		return nil, err
	}
	if req.GetSite() != "" {
		if err := s.allowSite(ctx, req.GetSite()); err != nil {
			return nil, err
		}
	}
	f := store.PendingFilter{Site: req.GetSite(), Limit: limit}
	_, f.Sites = scope(ctx)
	for i, st := range req.GetStates() {
		name, ok := pendingStates[st]
		if !ok {
			return nil, grpcerr.InvalidArgument(fmt.Sprintf("states[%d]", i), grpcerr.ReasonInvalidValue, fmt.Sprintf("state %v is not a valid filter", st))
		}
		f.States = append(f.States, name)
	}
	if f.After, err = decodeToken(req, req.GetPageToken()); err != nil {
		return nil, err
	}
	ps, more, err := s.st.ListPendingActions(ctx, f)
	if err != nil {
		return nil, s.storeErr(err)
	}
	if len(ps) == 0 { // a typo in the site is NotFound, also with a page token
		if err := grpcerr.SiteKnown(ctx, s.st, req.GetSite()); err != nil {
			return nil, err
		}
	}
	resp := &ironlinkv1.ListPendingActionsResponse{}
	for _, p := range ps {
		resp.Actions = append(resp.Actions, PendingToProto(p))
	}
	if more {
		resp.NextPageToken = encodeToken(req, ps[len(ps)-1].ID)
	}
	return resp, nil
}

func checkReason(reason string) (string, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return "", grpcerr.InvalidArgument("reason", grpcerr.ReasonRequired, "reason is required: say why (it is kept with the action)")
	}
	if err := textcheck.Text("reason", reason, MaxReasonBytes); err != nil {
		return "", grpcerr.FromCheck(err)
	}
	return reason, nil
}

func (s *Server) resolve(ctx context.Context, ids []int64, reason string, approve bool) ([]*ironlinkv1.PendingAction, error) {
	if len(ids) == 0 {
		return nil, grpcerr.InvalidArgument("ids", grpcerr.ReasonRequired, "ids is required: name at least one pending action")
	}
	if len(ids) > MaxIDs {
		return nil, grpcerr.InvalidArgument("ids", grpcerr.ReasonOutOfRange, fmt.Sprintf("%d ids, at most %d per call", len(ids), MaxIDs))
	}
	seen := map[int64]bool{}
	for i, id := range ids {
		if id <= 0 {
			return nil, grpcerr.InvalidArgument(fmt.Sprintf("ids[%d]", i), grpcerr.ReasonInvalidValue, fmt.Sprintf("id %d is not a pending action id", id))
		}
		if seen[id] {
			return nil, grpcerr.InvalidArgument(fmt.Sprintf("ids[%d]", i), grpcerr.ReasonInvalidValue, fmt.Sprintf("id %d named twice", id))
		}
		seen[id] = true
	}
	reason, err := checkReason(reason)
	if err != nil {
		return nil, err
	}
	sites, err := s.st.PendingSites(ctx, ids)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, grpcerr.NotFound("pending action", "", err.Error())
		}
		return nil, s.storeErr(err)
	}
	for _, id := range ids {
		if err := s.allow(ctx, "pending action "+strconv.FormatInt(id, 10), sites[id]); err != nil {
			return nil, err
		}
	}
	actor := s.actor(ctx)
	got, err := s.st.ResolvePendingActions(ctx, ids, approve, actor, reason)
	if err != nil {
		return nil, s.storeErr(err)
	}
	verb := "rejected"
	if approve {
		verb = "approved"
	}
	s.log.Info("pending actions "+verb, "actor", actor, "count", len(got), "ids", ids, "reason", textcheck.Prefix(reason, 256))
	out := make([]*ironlinkv1.PendingAction, len(got))
	for i, p := range got {
		out[i] = PendingToProto(p)
	}
	return out, nil
}

// ApprovePendingActions implements PolicyService.ApprovePendingActions.
func (s *Server) ApprovePendingActions(ctx context.Context, req *ironlinkv1.ApprovePendingActionsRequest) (*ironlinkv1.ApprovePendingActionsResponse, error) {
	got, err := s.resolve(ctx, req.GetIds(), req.GetReason(), true)
	if err != nil {
		return nil, err
	}
	return &ironlinkv1.ApprovePendingActionsResponse{Actions: got}, nil
}

// RejectPendingActions implements PolicyService.RejectPendingActions.
func (s *Server) RejectPendingActions(ctx context.Context, req *ironlinkv1.RejectPendingActionsRequest) (*ironlinkv1.RejectPendingActionsResponse, error) {
	got, err := s.resolve(ctx, req.GetIds(), req.GetReason(), false)
	if err != nil {
		return nil, err
	}
	return &ironlinkv1.RejectPendingActionsResponse{Actions: got}, nil
}

// SiteStates returns the policy state of every site the caller may see
// (one site when site is not ""), by name.
func (s *Server) SiteStates(ctx context.Context, site string) ([]*ironlinkv1.SitePolicyState, error) {
	f := s.src.Policy()
	now := s.now()
	var maxWin time.Duration
	for _, name := range append(f.SiteNames(), "") {
		if w := f.Effective(name).Guard.Window; w > maxWin {
			maxWin = w
		}
	}
	sites, err := s.st.PolicySites(ctx, now.Add(-maxWin))
	if err != nil {
		return nil, err
	}
	trips, err := s.st.DomainTrips(ctx, site)
	if err != nil {
		return nil, err
	}
	bySite := map[string][]store.DomainTrip{}
	for _, t := range trips {
		bySite[t.Site] = append(bySite[t.Site], t)
	}
	_, allowed := scope(ctx)
	var out []*ironlinkv1.SitePolicyState
	for _, ps := range sites {
		if (site != "" && ps.Name != site) || (allowed != nil && !slices.Contains(allowed, ps.Name)) {
			continue
		}
		st := SiteStateToProto(ps, f.Effective(ps.Name), now)
		st.TrippedDomains = trippedDomainsToProto(bySite[ps.Name])
		if st.CommonCause, err = s.commonCause(ctx, ps, bySite[ps.Name], f.Effective(ps.Name)); err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// SiteStateToProto renders a site's policy state under p at now.
func SiteStateToProto(ps store.PolicySite, p policy.SitePolicy, now time.Time) *ironlinkv1.SitePolicyState {
	a := 0
	for _, r := range ps.Recent {
		if !r.DryRun && r.At.After(now.Add(-p.Guard.Window)) {
			a++
		}
	}
	return &ironlinkv1.SitePolicyState{Site: ps.Name, Enabled: p.Enabled, DryRun: p.DryRun, GuardTripped: ps.TrippedSince != nil,
		GuardTrippedTime: ts(ps.TrippedSince), GuardTrippedRule: ps.TrippedRule, GuardTrippedDetail: ps.TrippedDetail,
		WindowCount: int32(a), SiteDeviceCount: int32(ps.Devices), PendingHeldCount: int32(ps.OpenHeld),
		PendingStaleCount: int32(ps.OpenStale), PendingAwaitingCount: int32(ps.OpenAwaiting),
		Guard: &ironlinkv1.PolicyGuard{MaxDevices: int32(p.Guard.MaxDevices), MaxPercent: p.Guard.MaxPercent,
			Window: durationpb.New(p.Guard.Window), PerLabel: labelGuardsToProto(p.Domains)}}
}

// ListSitePolicyStates implements PolicyService.ListSitePolicyStates.
func (s *Server) ListSitePolicyStates(ctx context.Context, req *ironlinkv1.ListSitePolicyStatesRequest) (*ironlinkv1.ListSitePolicyStatesResponse, error) {
	if err := checkSite("site", req.GetSite(), false); err != nil {
		return nil, err
	}
	if req.GetSite() != "" {
		if err := s.allowSite(ctx, req.GetSite()); err != nil {
			return nil, err
		}
	}
	states, err := s.SiteStates(ctx, req.GetSite())
	if err != nil {
		return nil, s.storeErr(err)
	}
	if req.GetSite() != "" && len(states) == 0 {
		return nil, grpcerr.NotFound("site", req.GetSite(), "")
	}
	return &ironlinkv1.ListSitePolicyStatesResponse{States: states}, nil
}

var holdKinds = map[ironlinkv1.DeviceHoldKind]string{
	ironlinkv1.DeviceHoldKind_DEVICE_HOLD_KIND_EXCLUSION:           store.HoldExclusion,
	ironlinkv1.DeviceHoldKind_DEVICE_HOLD_KIND_PLANNED_MAINTENANCE: store.HoldPlannedMaintenance,
}

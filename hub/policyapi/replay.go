package policyapi

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/policyreplay"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// SetReplayDB gives ReplayPolicy the database it reads (read-only; call
// before serving). Without it ReplayPolicy is Internal.
func (s *Server) SetReplayDB(pool *pgxpool.Pool) { s.replayDB = pool }

// ReplayPolicy implements PolicyService.ReplayPolicy: it replays the
// candidate file (or the policy in force) over the period's history
// (hub/policyreplay, one READ ONLY transaction) and marks each decision
// that differs from the recorded one. Decisions of sites the caller may
// not see are left out.
func (s *Server) ReplayPolicy(ctx context.Context, req *ironlinkv1.ReplayPolicyRequest) (*ironlinkv1.ReplayPolicyResponse, error) {
	if s.replayDB == nil {
		return nil, grpcerr.Internal("policy replay has no database on this hub")
	}
	if req.GetFromTime() == nil || req.GetToTime() == nil {
		return nil, grpcerr.InvalidArgument("from_time", grpcerr.ReasonRequired, "from_time and to_time are required")
	}
	from, to := req.GetFromTime().AsTime(), req.GetToTime().AsTime()
	if !to.After(from) || to.Sub(from) > policyreplay.MaxSpan {
		return nil, grpcerr.InvalidArgument("to_time", grpcerr.ReasonOutOfRange, "to_time must be after from_time, at most 92 days later")
	}
	if err := checkSite("site", req.GetSite(), false); err != nil {
		return nil, err
	}
	if req.GetSite() != "" {
		if err := s.allowSite(ctx, req.GetSite()); err != nil {
			return nil, err
		}
	}
	file := s.src.Policy()
	if req.GetPolicyYaml() != "" {
		f, err := policy.Parse([]byte(req.GetPolicyYaml()))
		if err != nil {
			return nil, grpcerr.InvalidArgument("policy_yaml", grpcerr.ReasonInvalidValue,
				textcheck.Prefix("policy_yaml: "+strings.ReplaceAll(err.Error(), "\n", "; "), grpcerr.MaxMessageBytes))
		}
		file = f
	}
	rep, err := policyreplay.Replay(ctx, s.replayDB, file, from, to)
	if err != nil {
		return nil, s.storeErr(err)
	}
	recorded, err := policyreplay.Recorded(ctx, s.replayDB, from, to)
	if err != nil {
		return nil, s.storeErr(err)
	}
	recRem, err := policyreplay.RecordedRemediations(ctx, s.replayDB, from, to)
	if err != nil {
		return nil, s.storeErr(err)
	}
	visible := s.visible(ctx, req.GetSite())
	out := replayResponse(rep, policyreplay.Diff(recorded, rep.Decisions), visible)
	remediationResponse(out, rep, policyreplay.DiffRemediations(recRem, rep.Remediations), visible)
	return out, nil
}

// remediationResponse adds rep's remediations and approvals to out, each
// remediation marked when it differs from the recorded one.
func remediationResponse(out *ironlinkv1.ReplayPolicyResponse, rep *policyreplay.Report, diffs []policyreplay.RemediationDifference, visible func(string) bool) {
	type key struct {
		dev string
		id  int64
	}
	differs := map[key]bool{}
	for _, d := range diffs {
		r := d.Replayed
		if r == nil {
			r = d.Recorded
		}
		if visible(r.Site) {
			differs[key{d.DeviceID, d.TriggerID}] = true
			out.RemediationDifferences++
		}
	}
	for _, r := range rep.Remediations {
		if !visible(r.Site) {
			continue
		}
		pr := &ironlinkv1.ReplayedRemediation{DeviceId: r.DeviceID, Site: r.Site, Rule: r.Rule, TriggerId: r.TriggerID,
			StartedTime: timestamppb.New(r.StartedAt), EndedTime: optTime(r.EndedAt), Outcome: r.Outcome, FixedStep: int32(r.FixedStep),
			Released: r.Released, HandoffReason: r.Handoff, Waiting: r.Waiting, Differs: differs[key{r.DeviceID, r.TriggerID}]}
		for _, st := range r.Steps {
			pr.Steps = append(pr.Steps, &ironlinkv1.ReplayedStep{Step: int32(st.Step), Kind: st.Kind, Result: st.Result,
				StartedTime: timestamppb.New(st.StartedAt), EndedTime: optTime(st.EndedAt)})
		}
		out.Remediations = append(out.Remediations, pr)
	}
	for _, a := range rep.Approvals {
		if visible(a.Site) {
			out.Approvals = append(out.Approvals, &ironlinkv1.ReplayedApproval{DeviceId: a.DeviceID, Site: a.Site, TriggerId: a.TriggerID,
				Rule: a.Rule, Approved: a.Approved, ResolvedBy: a.By, ResolvedTime: timestamppb.New(a.At)})
		}
	}
}

// optTime is t as a Timestamp, nil when zero.
func optTime(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// visible reports whether the caller sees site's decisions (and asked for
// them: only is the request's site, "" for every site).
func (s *Server) visible(ctx context.Context, only string) func(site string) bool {
	sc := authn.CallerScope(ctx)
	return func(site string) bool { return (only == "" || site == only) && sc.Allows(site) }
}

func replayResponse(rep *policyreplay.Report, diffs []policyreplay.Difference, visible func(string) bool) *ironlinkv1.ReplayPolicyResponse {
	differs := map[int64]bool{}
	out := &ironlinkv1.ReplayPolicyResponse{}
	for _, d := range diffs {
		site := ""
		if d.Replayed != nil {
			site = d.Replayed.Site
		} else {
			site = d.Recorded.Site
		}
		if visible(site) {
			differs[d.TriggerID] = true
			out.Differences++
		}
	}
	for _, d := range rep.Decisions {
		if !visible(d.Site) {
			continue
		}
		out.Decisions = append(out.Decisions, &ironlinkv1.ReplayedDecision{DeviceId: d.DeviceID, Site: d.Site, TriggerId: d.TriggerID,
			DecidedTime: timestamppb.New(d.At), Action: d.Action, Reason: d.Reason, Rule: d.Rule, Detail: d.Detail, DryRun: d.DryRun,
			TripsGuard: d.Trips, Differs: differs[d.TriggerID]})
	}
	for _, d := range rep.Days {
		if visible(d.Site) {
			out.Days = append(out.Days, &ironlinkv1.ReplayDay{Site: d.Site, Date: d.Date, Quarantines: int32(d.Quarantines),
				Pending: int32(d.Pending), Skips: int32(d.Skips), GuardTrips: int32(d.GuardTrips),
				LadderSteps: int32(d.LadderSteps), Fixes: int32(d.Fixes), Releases: int32(d.Releases), Handoffs: int32(d.Handoffs),
				Approvals: int32(d.Approvals), Rejections: int32(d.Rejections)})
		}
	}
	return out
}

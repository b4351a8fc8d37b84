package remediation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/devref"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// APIStore is what RemediationService reads and writes.
type APIStore interface {
	RemediationDevices(ctx context.Context) ([]store.RemediationDevice, error)
	DeviceLadders(ctx context.Context, id string, since time.Time) ([]store.RemediationLadder, error)
	LaddersSince(ctx context.Context, id string, since time.Time) (int, error)
	ListHandoffs(ctx context.Context, f store.HandoffFilter) ([]store.Handoff, error)
	GetHandoff(ctx context.Context, id int64) (store.Handoff, error)
	WebhookAttemptsOf(ctx context.Context, ids []int64) (map[int64][]store.WebhookAttempt, error)
	CloseHandoff(ctx context.Context, id int64, actor, note, source string) (store.Handoff, error)
	DevicesByName(ctx context.Context, name, site string) ([]store.DeviceRef, error)
	DeviceSite(ctx context.Context, id string) (string, error)
	DeviceNames(ctx context.Context, ids []string) (map[string]string, error)
	ValidationFailures(ctx context.Context) ([]store.ValidationFailure, error)
}

// API implements ironlinkv1.RemediationServiceServer.
type API struct {
	ironlinkv1.UnimplementedRemediationServiceServer
	st     APIStore
	policy func() *policy.File
	actor  func(context.Context) string
	log    *slog.Logger
}

// NewAPI returns RemediationService over st, the policy in force from
// pol and the caller's name from actor.
func NewAPI(st APIStore, pol func() *policy.File, actor func(context.Context) string, log *slog.Logger) *API {
	return &API{st: st, policy: pol, actor: actor, log: log}
}

// MaxNoteBytes bounds a handoff's closing note.
const MaxNoteBytes = 1024

// device resolves a device reference (field) to its id and site, checking
// the caller may see the site.
func (a *API) device(ctx context.Context, field, raw string) (string, string, error) {
	ref, err := devref.Parse(raw)
	if err != nil {
		reason := grpcerr.ReasonInvalidValue
		if raw == "" {
			reason = grpcerr.ReasonRequired
		}
		return "", "", grpcerr.InvalidArgument(field, reason, field+": "+err.Error())
	}
	id, site := ref.ID, ref.Site
	if id == "" {
		refs, err := a.st.DevicesByName(ctx, ref.Name, ref.Site)
		if err != nil {
			return "", "", grpcerr.FromStore(err)
		}
		if len(refs) != 1 {
			return "", "", grpcerr.NotFound("device", textcheck.Prefix(raw, textcheck.EchoBytes),
				fmt.Sprintf("%d devices called %s", len(refs), textcheck.Quote(ref.Name)))
		}
		id = refs[0].ID
	}
	got, err := a.st.DeviceSite(ctx, id)
	if err != nil {
		return "", "", grpcerr.FromStoreNamed(err, "device", id)
	}
	if site != "" && site != got {
		return "", "", grpcerr.NotFound("device", id, "device "+id+" is not at site "+site)
	}
	if sc := authn.CallerScope(ctx); !sc.Allows(got) {
		return "", "", sc.Deny(ctx, a.log, "device "+id, got)
	}
	return id, got, nil
}

// GetDeviceRemediation implements RemediationService.GetDeviceRemediation.
func (a *API) GetDeviceRemediation(ctx context.Context, req *ironlinkv1.GetDeviceRemediationRequest) (*ironlinkv1.GetDeviceRemediationResponse, error) {
	id, site, err := a.device(ctx, "device", req.GetDevice())
	if err != nil {
		return nil, err
	}
	out := &ironlinkv1.GetDeviceRemediationResponse{DeviceId: id, Site: site}
	names, err := a.st.DeviceNames(ctx, []string{id})
	if err != nil {
		return nil, grpcerr.FromStore(err)
	}
	out.DeviceName = names[id]
	devs, err := a.st.RemediationDevices(ctx)
	if err != nil {
		return nil, grpcerr.FromStore(err)
	}
	var dev *store.RemediationDevice
	for i := range devs {
		if devs[i].DeviceID == id {
			dev = &devs[i]
		}
	}
	runs, err := a.st.DeviceLadders(ctx, id, time.Time{})
	if err != nil {
		return nil, grpcerr.FromStore(err)
	}
	switch {
	case dev != nil && dev.Ladder != nil:
		out.Rule = dev.Ladder.Rule
	case dev != nil:
		out.Rule = dev.Rule
	case len(runs) > 0:
		out.Rule = runs[0].Rule
	}
	if len(runs) > 0 {
		out.LadderRun = ladderProto(runs[0])
	}
	p := a.policy().Effective(site)
	if out.Rule == "" || (dev == nil && len(runs) > 0 && runs[0].State != store.LadderRunning) {
		if done, err := a.validationPlan(ctx, out, p); done || err != nil {
			return out, err
		}
	}
	r, l := rule(p, out.Rule)
	if l != nil {
		if err := a.describeLadder(ctx, out, p, r, l, dev, time.Now()); err != nil {
			return nil, err
		}
	}
	hs, err := a.st.ListHandoffs(ctx, store.HandoffFilter{DeviceID: id, Limit: 20})
	if err != nil {
		return nil, grpcerr.FromStore(err)
	}
	if out.Handoffs, err = a.handoffsProto(ctx, hs); err != nil {
		return nil, err
	}
	return out, nil
}

// handoffsProto converts hs with their webhook attempts.
func (a *API) handoffsProto(ctx context.Context, hs []store.Handoff) ([]*ironlinkv1.Handoff, error) {
	ids := make([]int64, len(hs))
	for i, h := range hs {
		ids[i] = h.ID
	}
	attempts, err := a.st.WebhookAttemptsOf(ctx, ids)
	if err != nil {
		return nil, grpcerr.FromStore(err)
	}
	out := make([]*ironlinkv1.Handoff, len(hs))
	for i, h := range hs {
		out[i] = handoffProto(h, attempts[h.ID])
	}
	return out, nil
}

// describeLadder fills out with rule r's ladder l at site policy p: the
// steps, budget and the plan for dev (nil: the device is not held by a
// rule and has no open ladder).
func (a *API) describeLadder(ctx context.Context, out *ironlinkv1.GetDeviceRemediationResponse, p policy.SitePolicy, r policy.Rule,
	l *policy.Ladder, dev *store.RemediationDevice, now time.Time) error {
	for _, s := range l.Steps {
		out.Ladder = append(out.Ladder, &ironlinkv1.LadderStepSpec{Kind: s.Kind, Timeout: durationpb.New(s.Timeout), Continues: s.Continue})
	}
	out.Settle, out.Release, out.BudgetWindow = durationpb.New(l.Settle), l.Release, durationpb.New(l.Budget.Window)
	out.DryRun = p.DryRun || r.DryRun || l.DryRun
	used, err := a.st.LaddersSince(ctx, out.DeviceId, now.Add(-l.Budget.Window))
	if err != nil {
		return grpcerr.FromStore(err)
	}
	out.AttemptsUsed, out.AttemptsLeft = int32(used), int32(max(0, l.Budget.Ladders-used))
	var plan Plan
	switch {
	case dev == nil:
		out.Plan = "not held by a rule with a ladder: nothing to do"
		return nil
	case dev.Ladder != nil:
		plan = RunningPlan(l, *dev, *dev.Ladder)
	case dev.OpenHandoff:
		out.Plan = "handed off for repair: close the handoff once repaired"
		return nil
	case !FaultyFor(r, *dev):
		out.Plan = fmt.Sprintf("status %s: no fault to remediate", dev.Status)
		return nil
	default:
		blocked, _ := Blocked(p, *dev, Safety{}, now)
		plan = StartPlan(l, *dev, used, blocked)
	}
	out.Plan, out.NextStep = plan.Text, int32(plan.Step)
	if !plan.At.IsZero() {
		out.NextTime = timestamppb.New(plan.At)
	}
	return nil
}

// validationPlan fills out for a device whose failed validation run a
// validation rule of p matches and has not taken yet (the evaluator's
// next pass quarantines it, or, in dry-run, only plans): the rule, its
// ladder and the plan. done is false when there is no such run.
func (a *API) validationPlan(ctx context.Context, out *ironlinkv1.GetDeviceRemediationResponse, p policy.SitePolicy) (done bool, err error) {
	fs, err := a.st.ValidationFailures(ctx)
	if err != nil {
		return false, grpcerr.FromStore(err)
	}
	for _, f := range fs {
		if f.Device.DeviceID != out.DeviceId {
			continue
		}
		r, ok := policy.MatchValidation(p, f.Run.FailingChecks)
		if !p.Enabled || !ok {
			return false, nil
		}
		out.Rule = r.Name
		if err := a.describeLadder(ctx, out, p, r, r.Ladder, nil, time.Now()); err != nil {
			return true, err
		}
		used := int(out.AttemptsUsed)
		blocked, _ := Blocked(p, f.Device, Safety{}, time.Now())
		plan := ValidationPlan(r, f, used, blocked)
		out.Plan, out.NextStep = plan.Text, int32(plan.Step)
		return true, nil
	}
	return false, nil
}

// ListHandoffs implements RemediationService.ListHandoffs.
func (a *API) ListHandoffs(ctx context.Context, req *ironlinkv1.ListHandoffsRequest) (*ironlinkv1.ListHandoffsResponse, error) {
	n := int(req.GetPageSize())
	if n < 0 || n > 1000 {
		return nil, grpcerr.InvalidArgument("page_size", grpcerr.ReasonOutOfRange, fmt.Sprintf("page_size %d: want 0 to 1000", n))
	}
	f := store.HandoffFilter{Site: req.GetSite(), OpenOnly: req.GetOpenOnly(), Limit: n}
	if req.GetDevice() != "" {
		id, _, err := a.device(ctx, "device", req.GetDevice())
		if err != nil {
			return nil, err
		}
		f.DeviceID = id
	}
	hs, err := a.st.ListHandoffs(ctx, f)
	if err != nil {
		return nil, grpcerr.FromStore(err)
	}
	sc := authn.CallerScope(ctx)
	allowed := hs[:0]
	for _, h := range hs {
		if sc.Allows(h.Site) {
			allowed = append(allowed, h)
		}
	}
	out := &ironlinkv1.ListHandoffsResponse{}
	if out.Handoffs, err = a.handoffsProto(ctx, allowed); err != nil {
		return nil, err
	}
	return out, nil
}

// CloseHandoff implements RemediationService.CloseHandoff.
func (a *API) CloseHandoff(ctx context.Context, req *ironlinkv1.CloseHandoffRequest) (*ironlinkv1.CloseHandoffResponse, error) {
	if req.GetId() <= 0 {
		return nil, grpcerr.InvalidArgument("id", grpcerr.ReasonRequired, "id is required: the handoff's id")
	}
	note := req.GetNote()
	if strings.TrimSpace(note) == "" {
		return nil, grpcerr.InvalidArgument("note", grpcerr.ReasonRequired, "note is required: say what was repaired")
	}
	if err := textcheck.Text("note", note, MaxNoteBytes); err != nil {
		return nil, grpcerr.FromStore(err)
	}
	h, err := a.st.GetHandoff(ctx, req.GetId())
	if err != nil {
		return nil, grpcerr.FromStoreNamed(err, "handoff", fmt.Sprint(req.GetId()))
	}
	if sc := authn.CallerScope(ctx); !sc.Allows(h.Site) {
		return nil, sc.Deny(ctx, a.log, fmt.Sprintf("handoff %d", h.ID), h.Site)
	}
	h, err = a.st.CloseHandoff(ctx, h.ID, a.actor(ctx), note, "api")
	if errors.Is(err, store.ErrHandoffClosed) {
		return nil, grpcerr.HandoffClosed(err.Error())
	}
	if err != nil {
		return nil, grpcerr.FromStore(err)
	}
	hs, err := a.handoffsProto(ctx, []store.Handoff{h})
	if err != nil {
		return nil, err
	}
	return &ironlinkv1.CloseHandoffResponse{Handoff: hs[0]}, nil
}

func ts(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func ladderProto(l store.RemediationLadder) *ironlinkv1.RemediationLadder {
	out := &ironlinkv1.RemediationLadder{Id: l.ID, Rule: l.Rule, State: l.State, Position: int32(l.Position + 1),
		StepsTotal: int32(l.StepsTotal), FixedStep: int32(l.FixedStep), FixedKind: l.FixedKind, Waiting: l.Waiting,
		Detail: l.Detail, Released: l.Released, StartTime: timestamppb.New(l.StartedAt), EndTime: ts(l.EndedAt)}
	for _, s := range l.Steps {
		out.Steps = append(out.Steps, &ironlinkv1.RemediationStep{Step: int32(s.Step + 1), Kind: s.Kind, OperationId: s.OperationID,
			State: s.State, Detail: s.Detail, StartTime: timestamppb.New(s.StartedAt), GoodSince: ts(s.GoodSince), EndTime: ts(s.EndedAt)})
	}
	return out
}

func handoffProto(h store.Handoff, attempts []store.WebhookAttempt) *ironlinkv1.Handoff {
	out := &ironlinkv1.Handoff{Id: h.ID, DeviceId: h.DeviceID, DeviceName: h.DeviceName, Site: h.Site, Rule: h.Rule,
		Reason: h.Reason, Detail: h.Detail, State: h.State, LadderId: h.LadderID, CreateTime: timestamppb.New(h.CreatedAt),
		CloseTime: ts(h.ClosedAt), ClosedBy: h.ClosedBy, CloseNote: h.CloseNote, WebhookState: h.WebhookState,
		WebhookAttempts: int32(h.WebhookAttempts), DeliveredTime: ts(h.DeliveredAt)}
	for _, a := range attempts {
		out.WebhookAttemptLog = append(out.WebhookAttemptLog, &ironlinkv1.HandoffWebhookAttempt{Attempt: int32(a.Attempt),
			AttemptTime: timestamppb.New(a.AttemptedAt), StatusCode: int32(a.StatusCode), Error: a.Error, Duration: durationpb.New(a.Duration)})
	}
	return out
}

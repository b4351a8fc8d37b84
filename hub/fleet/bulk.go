package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/labels"
	"github.com/ironlink/ironlink/internal/textcheck"
	"github.com/ironlink/ironlink/internal/wire"
)

// Bulk returns the bulk quarantine and release by selector
// (ironlink.v1.BulkService; issue 12 item 5) over the same store, actor
// and site binding as s.
func (s *Server) Bulk() ironlinkv1.BulkServiceServer { return bulkServer{s: s} }

// bulkServer implements ironlinkv1.BulkServiceServer.
type bulkServer struct {
	ironlinkv1.UnimplementedBulkServiceServer
	s *Server
}

// MaxPreviewDevices is the most devices a preview lists (its count is
// always the full number).
const MaxPreviewDevices = 1000

// maxSelectorValues bounds each repeated field of a selector.
const maxSelectorValues = 32

// ReasonCountMismatch is the ErrorInfo reason of a bulk call refused
// because the selector matched another number of devices than
// expected_count; its metadata "matched" is the current count and
// "expected" the caller's.
const ReasonCountMismatch = grpcerr.ReasonCountMismatch

// ReasonTooManyDevices is the ErrorInfo reason of a bulk call whose
// selector matched more than store.MaxBulkDevices devices.
const ReasonTooManyDevices = grpcerr.ReasonTooManyDevices

// SourceBulk is the source recorded for impairment changes made by a bulk call.
const SourceBulk = "operator-api-bulk"

// bulkSelector validates sel (at field) and converts it for the store,
// bound to the caller's sites. It also returns the selector's canonical
// text for the record ("site=site-b,status=FAULTED,...").
func (s *Server) bulkSelector(ctx context.Context, field string, sel *ironlinkv1.DeviceSelector) (store.DeviceSelector, string, error) {
	var out store.DeviceSelector
	if sel.GetSite() == "" && len(sel.GetStatuses()) == 0 && len(sel.GetConditionReasons()) == 0 &&
		sel.GetResourceClass() == "" && sel.GetNamePattern() == "" && len(sel.GetHardwareFacts()) == 0 && len(sel.GetLabels()) == 0 &&
		len(sel.GetDeviceIds()) == 0 {
		return out, "", grpcerr.InvalidArgument(field, grpcerr.ReasonRequired,
			field+" is empty: give at least one of site, statuses, condition_reasons, resource_class, name_pattern, hardware_facts, labels, device_ids (an empty selector would match the whole fleet)")
	}
	if err := checkSiteFilter(sel.GetSite()); err != nil {
		return out, "", err
	}
	sc := callerScope(ctx)
	if err := s.checkSiteAllowed(ctx, sc, sel.GetSite()); err != nil {
		return out, "", err
	}
	// A misspelt site is NotFound, not "0 devices match" (as ListDevices).
	if err := s.checkExists(ctx, sel.GetSite(), ""); err != nil {
		return out, "", err
	}
	out.Site, out.Sites = sel.GetSite(), sc.Sites
	var parts []string
	if out.Site != "" {
		parts = append(parts, "site="+out.Site)
	}
	if len(sel.GetStatuses()) > maxSelectorValues || len(sel.GetConditionReasons()) > maxSelectorValues {
		return out, "", grpcerr.InvalidArgument(field, grpcerr.ReasonOutOfRange, fmt.Sprintf("%s: at most %d statuses and %d condition reasons", field, maxSelectorValues, maxSelectorValues))
	}
	for i, st := range sel.GetStatuses() {
		hs, ok := statusFromProto(st)
		if !ok {
			return out, "", grpcerr.InvalidArgument(fmt.Sprintf("%s.statuses[%d]", field, i), grpcerr.ReasonInvalidValue, fmt.Sprintf("status %v is not a valid selector", st))
		}
		out.Statuses = append(out.Statuses, hs)
		parts = append(parts, "status="+wire.EnumName(st, "OPERATIONAL_STATUS_"))
	}
	for i, r := range sel.GetConditionReasons() {
		f := fmt.Sprintf("%s.condition_reasons[%d]", field, i)
		if err := textcheck.Line(f, r, condition.MaxReasonBytes); err != nil {
			return out, "", grpcerr.FromCheck(err)
		}
		if r == "" {
			return out, "", grpcerr.InvalidArgument(f, grpcerr.ReasonRequired, f+" is empty")
		}
		out.Reasons = append(out.Reasons, r)
		parts = append(parts, "reason="+r)
	}
	if rc := sel.GetResourceClass(); rc != "" {
		if err := textcheck.Line(field+".resource_class", rc, 255); err != nil {
			return out, "", grpcerr.FromCheck(err)
		}
		out.ResourceClass = rc
		parts = append(parts, "class="+rc)
	}
	if p := sel.GetNamePattern(); p != "" {
		if err := textcheck.Line(field+".name_pattern", p, maxNamePatternBytes); err != nil {
			return out, "", grpcerr.FromCheck(err)
		}
		like, err := store.GlobToLike(p)
		if err != nil {
			return out, "", grpcerr.InvalidArgument(field+".name_pattern", grpcerr.ReasonInvalidValue, field+".name_pattern: "+err.Error())
		}
		out.NameLike = like
		parts = append(parts, "name="+p)
	}
	ids, hw, err := s.hardwareIDs(ctx, field, sel, sc.Sites)
	if err != nil {
		return out, "", err
	}
	if ids != nil {
		out.IDs = ids
		parts = append(parts, hw)
	}
	if out.Labels, err = labelFilter(field+".labels", sel.GetLabels(), time.Time{}); err != nil {
		return out, "", err
	}
	if len(out.Labels) > 0 {
		parts = append(parts, labels.String(out.Labels))
	}
	listed, err := selectorDeviceIDs(field, sel.GetDeviceIds())
	if err != nil {
		return out, "", err
	}
	if listed != nil {
		out.IDs = intersectIDs(out.IDs, listed)
		parts = append(parts, fmt.Sprintf("ids=%d", len(listed)))
	}
	return out, strings.Join(parts, ","), nil
}

// MaxSelectorDeviceIDs is the most device ids one selector may list
// (DeviceSelector.device_ids).
const MaxSelectorDeviceIDs = 1000

// selectorDeviceIDs validates the selector's device_ids (at field) and
// returns them canonical and deduplicated; nil when none are given.
func selectorDeviceIDs(field string, raw []string) ([]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if len(raw) > MaxSelectorDeviceIDs {
		return nil, grpcerr.InvalidArgument(field+".device_ids", grpcerr.ReasonOutOfRange,
			fmt.Sprintf("%s.device_ids: %d ids, at most %d", field, len(raw), MaxSelectorDeviceIDs))
	}
	out := make([]string, 0, len(raw))
	seen := make(map[string]bool, len(raw))
	for i, r := range raw {
		id, err := parseID(fmt.Sprintf("%s.device_ids[%d]", field, i), r)
		if err != nil {
			return nil, err
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

// intersectIDs keeps the ids of listed that are in have (AND of two id
// filters); have nil means no filter yet, so listed is returned as is.
func intersectIDs(have, listed []string) []string {
	if have == nil {
		return listed
	}
	in := make(map[string]bool, len(have))
	for _, id := range have {
		in[id] = true
	}
	out := []string{}
	for _, id := range listed {
		if in[id] {
			out = append(out, id)
		}
	}
	return out
}

// PreviewBulkImpairment implements BulkService.PreviewBulkImpairment.
func (b bulkServer) PreviewBulkImpairment(ctx context.Context, req *ironlinkv1.PreviewBulkImpairmentRequest) (*ironlinkv1.PreviewBulkImpairmentResponse, error) {
	s := b.s
	sel, _, err := s.bulkSelector(ctx, "selector", req.GetSelector())
	if err != nil {
		return nil, err
	}
	ms, n, err := s.store.MatchDevices(ctx, sel, MaxPreviewDevices)
	if err != nil {
		return nil, s.storeErr(err, "", "")
	}
	resp := &ironlinkv1.PreviewBulkImpairmentResponse{Count: int32(n)}
	for _, m := range ms {
		resp.Devices = append(resp.Devices, &ironlinkv1.BulkMatch{DeviceId: m.ID, Site: m.Site, Name: m.Name, Status: statusToProto(m.Status)})
	}
	if n > 0 && n <= store.MaxBulkDevices {
		plans, err := s.store.PlanBulkRelease(ctx, sel, store.HolderOperator, req.GetAllHolds())
		if err != nil {
			return nil, s.storeErr(err, "", "")
		}
		resp.ReleaseCounts = releaseCountsToProto(store.CountReleasePlans(plans))
	}
	return resp, nil
}

// bulkImpair validates a bulk call and runs it in the store.
// req carries the desired state and, for a release, the holds it releases;
// it returns the recorded request (with the release plans).
func (s *Server) bulkImpair(ctx context.Context, selector *ironlinkv1.DeviceSelector, reason string, expected int32, req store.BulkRequest) (store.BulkRequest, []*ironlinkv1.OperatorCommand, error) {
	desired := req.Desired
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return store.BulkRequest{}, nil, grpcerr.InvalidArgument("reason", grpcerr.ReasonRequired, "reason is required: say why (it is kept in every device's quarantine history)")
	}
	if err := textcheck.Text("reason", reason, MaxReasonBytes); err != nil {
		return store.BulkRequest{}, nil, grpcerr.FromCheck(err)
	}
	if expected < 1 {
		return store.BulkRequest{}, nil, grpcerr.InvalidArgument("expected_count", grpcerr.ReasonRequired,
			fmt.Sprintf("expected_count %d: give the count PreviewBulkImpairment returned (at least 1)", expected))
	}
	sel, text, err := s.bulkSelector(ctx, "selector", selector)
	if err != nil {
		return store.BulkRequest{}, nil, err
	}
	actor := s.actor(ctx)
	req.Selector, req.Actor, req.Reason, req.Source = text, actor, reason, SourceBulk
	r, cmds, err := s.store.BulkSetDesiredImpairment(ctx, sel, int(expected), req)
	var mismatch *store.CountMismatchError
	switch {
	case errors.As(err, &mismatch):
		s.log.Warn("bulk impairment refused: count mismatch", "selector", text, "expected", mismatch.Expected, "matched", mismatch.Matched, "actor", actor)
		return store.BulkRequest{}, nil, grpcerr.FromBulk(err, text)
	case errors.Is(err, store.ErrTooManyDevices):
		return store.BulkRequest{}, nil, grpcerr.FromBulk(err, text)
	case err != nil:
		return store.BulkRequest{}, nil, s.storeErr(err, "", "")
	}
	s.log.Info("bulk impairment requested", "request_id", r.ID, "desired", desired, "selector", text, "devices", len(cmds), "actor", actor, "reason", reason)
	out := make([]*ironlinkv1.OperatorCommand, len(cmds))
	for i, c := range cmds {
		out[i] = commandToProto(c)
	}
	return r, out, nil
}

// BulkQuarantine implements BulkService.BulkQuarantine.
func (b bulkServer) BulkQuarantine(ctx context.Context, req *ironlinkv1.BulkQuarantineRequest) (*ironlinkv1.BulkQuarantineResponse, error) {
	r, cmds, err := b.s.bulkImpair(ctx, req.GetSelector(), req.GetReason(), req.GetExpectedCount(), store.BulkRequest{Desired: store.ImpairmentQuarantined})
	if err != nil {
		return nil, err
	}
	return &ironlinkv1.BulkQuarantineResponse{RequestId: r.ID, Commands: cmds}, nil
}

// BulkRelease implements BulkService.BulkRelease: the operators' hold (or
// every hold) of each matched device, as ReleaseDevice does.
func (b bulkServer) BulkRelease(ctx context.Context, req *ironlinkv1.BulkReleaseRequest) (*ironlinkv1.BulkReleaseResponse, error) {
	r, cmds, err := b.s.bulkImpair(ctx, req.GetSelector(), req.GetReason(), req.GetExpectedCount(),
		store.BulkRequest{Desired: store.ImpairmentReleased, Holder: store.HolderOperator, AllHolds: req.GetAllHolds()})
	if err != nil {
		return nil, err
	}
	return &ironlinkv1.BulkReleaseResponse{RequestId: r.ID, Commands: cmds, Counts: releaseCountsToProto(store.CountReleasePlans(r.Plans))}, nil
}

package fleet

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/hwprofile"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/logkey"
	"github.com/ironlink/ironlink/internal/wire"
)

// maxHistoryPage bounds a page of hardware history or validation runs.
const maxHistoryPage = 100

func historyPage(n int32) (int, error) {
	switch {
	case n < 0 || n > maxHistoryPage:
		return 0, grpcerr.InvalidArgument("page_size", grpcerr.ReasonOutOfRange, fmt.Sprintf("page_size %d is outside 0-%d (0 means 20)", n, maxHistoryPage))
	case n == 0:
		return 20, nil
	}
	return int(n), nil
}

// device resolves ref ("NAME", "SITE/NAME", "UUID", "SITE/UUID") and
// checks that the caller may see it.
func (s *Server) device(ctx context.Context, ref string) (string, error) {
	if ref == "" {
		return "", grpcerr.InvalidArgument("device", grpcerr.ReasonRequired, "device is required")
	}
	id, err := s.resolveDevice(ctx, deviceRef{name: ref})
	if err != nil {
		return "", err
	}
	return id, s.checkDevice(ctx, callerScope(ctx), id)
}

// ListHardwareHistory implements HardwareService.ListHardwareHistory.
func (h hardwareServer) ListHardwareHistory(ctx context.Context, req *ironlinkv1.ListHardwareHistoryRequest) (*ironlinkv1.ListHardwareHistoryResponse, error) {
	s := h.s
	limit, err := historyPage(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	id, err := s.device(ctx, req.GetDevice())
	if err != nil {
		return nil, err
	}
	es, err := s.store.HardwareHistory(ctx, id, limit+1)
	if err != nil {
		return nil, s.storeErr(err, "device", id)
	}
	resp := &ironlinkv1.ListHardwareHistoryResponse{DeviceId: id}
	states := make([]*ironlinkv1.HardwareState, len(es))
	for i, e := range es {
		if states[i], err = hwprofile.Decode(e.JSON); err != nil {
			s.log.Warn("stored hardware undecodable", logkey.DeviceID, id, "err", err)
		}
	}
	for i := range min(len(es), limit) {
		var older *ironlinkv1.HardwareState
		if i+1 < len(es) {
			older = states[i+1]
		}
		resp.Entries = append(resp.Entries, &ironlinkv1.HardwareHistoryEntry{Hardware: states[i],
			RecordTime: timestamppb.New(es[i].RecordedAt), Changes: factChanges(older, states[i])})
	}
	return resp, nil
}

// factChanges lists the facts that differ from older to newer, "fact: old
// -> new"; none when older is nil.
func factChanges(older, newer *ironlinkv1.HardwareState) []string {
	if older == nil {
		return nil
	}
	a, b := hwprofile.Facts(older), hwprofile.Facts(newer)
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if va, vb := orNone(a, k), orNone(b, k); va != vb {
			out = append(out, k+": "+va+" -> "+vb)
		}
	}
	if older.GetInventoryStatus() != newer.GetInventoryStatus() {
		out = append(out, "inventory_status: "+older.GetInventoryStatus()+" -> "+newer.GetInventoryStatus())
	}
	return out
}

func orNone(m map[string]string, k string) string {
	if v, ok := m[k]; ok {
		return v
	}
	return hwprofile.NoValue
}

// ListValidationRuns implements HardwareService.ListValidationRuns.
func (h hardwareServer) ListValidationRuns(ctx context.Context, req *ironlinkv1.ListValidationRunsRequest) (*ironlinkv1.ListValidationRunsResponse, error) {
	s := h.s
	limit, err := historyPage(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	var id string
	switch {
	case req.GetDevice() != "":
		if id, err = s.device(ctx, req.GetDevice()); err != nil {
			return nil, err
		}
	case req.GetSite() != "":
		if _, _, err := s.listScope(ctx, 0, req.GetSite()); err != nil {
			return nil, err
		}
		if err := s.checkExists(ctx, req.GetSite(), ""); err != nil {
			return nil, err
		}
	default:
		return nil, grpcerr.InvalidArgument("device", grpcerr.ReasonRequired, "give device or site")
	}
	runs, err := s.store.ValidationRuns(ctx, id, req.GetSite(), limit)
	if err != nil {
		return nil, s.storeErr(err, "", "")
	}
	return &ironlinkv1.ListValidationRunsResponse{Runs: RunsToProto(runs)}, nil
}

// RunsToProto converts stored validation runs.
func RunsToProto(runs []store.ValidationRun) []*ironlinkv1.ValidationRun {
	out := make([]*ironlinkv1.ValidationRun, len(runs))
	for i, r := range runs {
		out[i] = RunToProto(r)
	}
	return out
}

// RunToProto converts one stored validation run with its results.
func RunToProto(r store.ValidationRun) *ironlinkv1.ValidationRun {
	p := &ironlinkv1.ValidationRun{RunId: r.ID, DeviceId: r.DeviceID, DeviceName: r.DeviceName, Site: r.Site,
		State:          wire.EnumFromName[ironlinkv1.ValidationRunState](r.State, ironlinkv1.ValidationRunState_value, "VALIDATION_RUN_STATE_"),
		RequiredChecks: r.RequiredChecks, FailingChecks: r.FailingChecks, Message: r.Message,
		CreateTime: timestamppb.New(r.CreatedAt), OfferCommandId: r.OfferCommandID}
	if r.EndedAt != nil {
		p.EndTime = timestamppb.New(*r.EndedAt)
	}
	for _, v := range r.Results {
		res := ironlinkv1.ValidationResult_VALIDATION_RESULT_FAIL
		if v.Pass {
			res = ironlinkv1.ValidationResult_VALIDATION_RESULT_PASS
		}
		p.Results = append(p.Results, &ironlinkv1.ValidationCheckResult{Check: v.Check, Result: res,
			Duration: durationpb.New(v.Duration), OutputExcerpt: v.OutputExcerpt, ArtifactsUrl: v.ArtifactsURL,
			RecordTime: timestamppb.New(v.RecordedAt), Reporter: v.Reporter})
	}
	return p
}

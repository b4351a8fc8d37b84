package policyapi

import (
	"context"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/store"
)

// labelGuardsToProto renders a policy's per-label guards.
func labelGuardsToProto(ds []policy.DomainGuard) []*ironlinkv1.PolicyLabelGuard {
	var out []*ironlinkv1.PolicyLabelGuard
	for _, g := range ds {
		out = append(out, &ironlinkv1.PolicyLabelGuard{Label: g.Label, MaxDevices: int32(g.MaxDevices), MaxPercent: g.MaxPercent})
	}
	return out
}

// CauseToProto renders what a tripped guard's faults have in common.
func CauseToProto(c policy.Cause) *ironlinkv1.GuardCommonCause {
	out := &ironlinkv1.GuardCommonCause{Summary: c.Summary, FaultCount: int32(c.Faults), TogetherCount: int32(c.Together)}
	for _, sh := range c.Shares {
		out.Shares = append(out.Shares, &ironlinkv1.LabelShare{Label: sh.Label, Value: sh.Value, Count: int32(sh.Count)})
	}
	return out
}

// commonCause is what the faults behind ps's tripped guard have in common
// (policy.CommonCause over the labels of the devices the site's live
// decisions quarantined or held from one guard window before the trip on);
// nil while the guard is armed.
func (s *Server) commonCause(ctx context.Context, ps store.PolicySite, p policy.SitePolicy) (*ironlinkv1.GuardCommonCause, error) {
	if ps.TrippedSince == nil {
		return nil, nil
	}
	faults, err := s.st.GuardFaultLabels(ctx, ps.Name, ps.TrippedSince.Add(-p.Guard.Window))
	if err != nil {
		return nil, err
	}
	return CauseToProto(policy.CommonCause(faults)), nil
}

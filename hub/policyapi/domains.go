package policyapi

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

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

// trippedDomainsToProto renders a site's tripped per-label guards.
func trippedDomainsToProto(trips []store.DomainTrip) []*ironlinkv1.GuardTrippedDomain {
	var out []*ironlinkv1.GuardTrippedDomain
	for _, t := range trips {
		out = append(out, &ironlinkv1.GuardTrippedDomain{Label: t.Label, Value: t.Value, TrippedTime: timestamppb.New(t.Since),
			Rule: t.Rule, Detail: t.Detail, PendingHeldCount: int32(t.OpenHeld)})
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

// commonCause is what the faults behind ps's tripped guard, or its
// tripped per-label guards trips, have in common (policy.CommonCause over
// the labels of the devices the site's live decisions quarantined or held
// from one guard window before the earliest trip on); nil while every
// guard is armed.
func (s *Server) commonCause(ctx context.Context, ps store.PolicySite, trips []store.DomainTrip, p policy.SitePolicy) (*ironlinkv1.GuardCommonCause, error) {
	var since *time.Time
	if ps.TrippedSince != nil {
		since = ps.TrippedSince
	}
	for _, t := range trips {
		if since == nil || t.Since.Before(*since) {
			since = &t.Since
		}
	}
	if since == nil {
		return nil, nil
	}
	faults, err := s.st.GuardFaultLabels(ctx, ps.Name, since.Add(-p.Guard.Window))
	if err != nil {
		return nil, err
	}
	return CauseToProto(policy.CommonCause(faults)), nil
}

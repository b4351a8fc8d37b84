package fleet

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	hubstatus "github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/wire"
)

// addStatusMessages fills Device.status_message of a ListDevices page (one
// query for the page).
func (s *Server) addStatusMessages(ctx context.Context, devs []*ironlinkv1.Device) error {
	if len(devs) == 0 {
		return nil
	}
	ids := make([]string, len(devs))
	for i, d := range devs {
		ids[i] = d.GetDeviceId()
	}
	scs, err := s.store.StatusContexts(ctx, ids)
	if err != nil {
		return s.storeErr(err, "", "")
	}
	for _, d := range devs {
		if sc, ok := scs[d.GetDeviceId()]; ok {
			d.StatusMessage = statusMessage(d.GetSite(), sc)
		}
	}
	return nil
}

// explainDevice fills the device's status_message and resp.explanation
// from d (with its conditions).
func (s *Server) explainDevice(ctx context.Context, d store.Device, resp *ironlinkv1.GetDeviceResponse) error {
	sc, err := s.store.StatusContextOf(ctx, d.ID)
	if err != nil {
		return s.storeErr(err, "device", d.ID)
	}
	resp.Device.StatusMessage = statusMessage(d.Site, sc)
	resp.Explanation = explanation(d, sc, resp.Device.StatusMessage)
	return nil
}

// statusMessage is the short form of why a device has its status
// (Device.status_message).
func statusMessage(site string, sc store.StatusContext) string {
	switch sc.Status {
	case hubstatus.Unknown:
		return ""
	case hubstatus.Unreachable:
		msg := "site " + site + " silent"
		if sc.SiteLastSeen != nil {
			msg += " since " + sc.SiteLastSeen.UTC().Format(time.RFC3339)
		} else {
			msg += ", never heard from"
		}
		if sc.LastKnownStatus != "" {
			msg += "; last known " + string(sc.LastKnownStatus)
			if sc.Message != "" {
				msg += ": " + sc.Message
			}
		}
		return msg
	case hubstatus.Quarantined:
		if q := sc.Quarantine; q != nil {
			return fmt.Sprintf("quarantined by %s (%s) at %s: %s", q.Actor, q.Source, q.ChangedAt.UTC().Format(time.RFC3339), q.Reason)
		}
	case hubstatus.Maintenance:
		switch {
		case sc.Fault != "" && !strings.Contains(sc.Message, sc.Fault):
			if sc.Message == "" {
				return "Ironic fault: " + sc.Fault
			}
			return sc.Message + " (Ironic fault: " + sc.Fault + ")"
		}
	}
	return sc.Message
}

// explanation is GetDeviceResponse.explanation: the rule that matched
// (re-derived with hub/status from the same inputs the stored status came
// from; the stored status's rule should they ever disagree), the
// conditions behind it, the quarantine in force and the site's silence.
func explanation(d store.Device, sc store.StatusContext, msg string) *ironlinkv1.StatusExplanation {
	conds := map[condition.Type]condition.Condition{}
	for _, c := range d.Conditions {
		conds[c.Type] = c
	}
	res := hubstatus.Derive(hubstatus.Input{Reported: len(conds) > 0, SiteStale: sc.SiteStale,
		Quarantined: d.DesiredImpairment == store.ImpairmentQuarantined, Conditions: conds})
	rule := res.Rule
	if res.Status != d.Status {
		rule = hubstatus.RuleFor(d.Status)
	}
	e := &ironlinkv1.StatusExplanation{
		Status: statusToProto(d.Status), Rule: int32(rule), RuleDescription: rule.String(), Reason: d.StatusReason,
		Message: msg, Since: timestamppb.New(d.StatusChangedAt),
	}
	behind := rule.Condition()
	if rule == hubstatus.RuleHealthFatal {
		behind = res.Because // the health condition that matched
	}
	if d.Status == hubstatus.Unreachable {
		e.LastKnownStatus = statusToProto(d.LastKnownStatus)
		e.SiteSilence = &ironlinkv1.SiteSilence{Site: d.Site}
		if sc.SiteLastSeen != nil {
			e.SiteSilence.LastSeenTime = timestamppb.New(*sc.SiteLastSeen)
		}
		behind = hubstatus.RuleFor(d.LastKnownStatus).Condition()
	}
	if c, ok := conds[behind]; ok && behind != "" {
		e.Conditions = append(e.Conditions, wire.ConditionToProto(c))
	}
	if q := sc.Quarantine; q != nil {
		e.Quarantine = &ironlinkv1.QuarantineExplanation{
			Actor: q.Actor, Reason: q.Reason, Source: q.Source, ChangeTime: timestamppb.New(q.ChangedAt),
			Generation: q.Generation, CommandId: q.CommandID,
			CommandState: commandStateToProto(q.CommandState),
			Applied:      q.Applied, LastError: q.LastError,
		}
	}
	return e
}

package web

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/hwview"
)

// authnSites is the caller's roster sites (nil: every site).
func authnSites(ctx context.Context) []string { return authn.CallerScope(ctx).Sites }

// isIDPrefix reports whether ref may be a prefix of a device id: 4 to 35
// hex digits and hyphens.
func isIDPrefix(ref string) bool {
	return len(ref) >= 4 && len(ref) < 36 && strings.Trim(strings.ToLower(ref), "0123456789abcdef-") == ""
}

type deviceData struct {
	Device     *ironlinkv1.Device
	Status     []*ironlinkv1.StatusChange
	Impairment []*ironlinkv1.ImpairmentChange
	Commands   []*ironlinkv1.OperatorCommand
	CondHist   []conditionChange
	Timeline   timelineSVG
	CanWrite   bool
	Command    *commandData // the command named in ?command=, if any
	// CanOperate: the node actions are offered (operations:write and a
	// hub with SetOperations); Operations are the device's recent ones.
	CanOperate bool
	Operations []*ironlinkv1.Operation
	// Holds are the quarantine holds; Plan what a release would do now
	// (nil when not quarantined); Explanation why the status.
	Holds       []*ironlinkv1.QuarantineHold
	Plan        *ironlinkv1.ReleasePlan
	Explanation *ironlinkv1.StatusExplanation
	// Decisions are the policy's latest decisions on the device (nil
	// without a policy API); HasPolicy says whether the hub has one.
	Decisions []*ironlinkv1.PolicyDecision
	HasPolicy bool
	// ValidationRuns are the device's newest validation runs with their
	// checks' results (GetDevice's validation_runs).
	ValidationRuns []*ironlinkv1.ValidationRun
	// HardwareState says what is known of the device's inventory
	// (hwview.State), HardwareFacts its key facts and HardwareProfile the
	// profile check (nil without a profile).
	HardwareState   string
	HardwareFacts   []hwview.Fact
	HardwareProfile *ironlinkv1.HardwareProfileMatch
	// Remediation is what `ironlink explain` shows of the device (nil
	// without a remediation API): the ladder, why it waits, the handoffs
	// with their webhook delivery attempts.
	Remediation *ironlinkv1.GetDeviceRemediationResponse
	// Released is what the release that redirected here did (?release=),
	// with the holds that remain now; nil otherwise.
	Released *releaseResult
}

// getDevice reads the device the path names: its UUID, name, SITE/NAME
// or SITE/UUID (the API's device_name forms), or a unique prefix of its id
// (at least 4 hex digits), through FleetService.GetDevice and the policy's
// decorator.
func (s *Server) getDevice(ctx context.Context, ref string, limit int32) (*ironlinkv1.GetDeviceResponse, error) {
	get := func(ref string) (*ironlinkv1.GetDeviceResponse, error) {
		return decorated(s, ctx, "GetDevice", &ironlinkv1.GetDeviceRequest{DeviceName: ref, HistoryLimit: limit}, s.fleet.GetDevice)
	}
	resp, err := get(ref)
	if status.Code(err) != codes.NotFound || !isIDPrefix(ref) {
		return resp, err
	}
	ids, perr := devicesByIDPrefix(ctx, s.store.Pool(), ref, authnSites(ctx))
	switch {
	case perr != nil:
		return nil, perr
	case len(ids) == 1:
		return get(ids[0])
	case len(ids) > 1:
		return nil, grpcerr.InvalidArgument("device", grpcerr.ReasonInvalidValue,
			fmt.Sprintf("device id prefix %q is ambiguous: it starts %s", ref, strings.Join(ids, ", ")))
	}
	return resp, err
}

func (s *Server) device(w http.ResponseWriter, r *http.Request, id Identity) {
	ctx := apiContext(r.Context(), id)
	ref := r.PathValue("id")
	if site := r.PathValue("site"); site != "" {
		ref = site + "/" + r.PathValue("name")
	}
	resp, err := s.getDevice(ctx, ref, historyLimit)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	dev := resp.GetDevice()
	cmds, err := s.fleet.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{DeviceId: dev.GetDeviceId(), PageSize: commandsShown})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	ch, err := conditionHistory(ctx, s.store.Pool(), dev.GetDeviceId(), historyLimit*7)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	d := deviceData{Device: dev, Status: resp.GetStatusHistory(), Impairment: resp.GetImpairmentHistory(),
		Commands: cmds.GetCommands(), CondHist: ch, CanWrite: id.CanWrite(),
		CanOperate: id.CanWrite() && s.ops != nil, Operations: resp.GetRecentOperations(),
		Holds: resp.GetQuarantineHolds(), Plan: resp.GetReleasePlan(), Explanation: resp.GetExplanation(), HasPolicy: s.policy != nil,
		ValidationRuns: resp.GetValidationRuns(), HardwareState: hwview.State(resp.GetHardware()), HardwareFacts: hwview.Facts(resp.GetHardware()),
		HardwareProfile: resp.GetHardwareProfile()}
	if s.policy != nil {
		dr, err := s.policy.ListPolicyDecisions(ctx, &ironlinkv1.ListPolicyDecisionsRequest{DeviceId: dev.GetDeviceId(), PageSize: commandsShown})
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		d.Decisions = dr.GetDecisions()
	}
	if s.rem != nil {
		rr, err := s.rem.GetDeviceRemediation(ctx, &ironlinkv1.GetDeviceRemediationRequest{Device: dev.GetDeviceId()})
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		d.Remediation = rr
	}
	if len(d.CondHist) > 50 {
		d.CondHist = d.CondHist[:50]
	}
	d.Timeline = deviceTimeline(s.now(), dev, resp.GetStatusHistory(), ch, resp.GetImpairmentHistory())
	var cmdDesired ironlinkv1.ImpairmentState
	if c := r.URL.Query().Get("command"); c != "" {
		if cr, err := s.fleet.GetCommand(ctx, &ironlinkv1.GetCommandRequest{CommandId: c}); err == nil && cr.GetCommand().GetDeviceId() == dev.GetDeviceId() {
			d.Command = newCommandData(cr.GetCommand())
			cmdDesired = cr.GetCommand().GetDesired()
		}
	}
	// ?release=OUTCOME: the page a release redirected to says what it did,
	// naming the holds that remain now. The query is only a link, so the
	// outcome is shown only where the device agrees with it: a restore
	// needs ?command= naming this device's release command, the others
	// the holds they speak of (some, or none).
	if v := r.URL.Query().Get("release"); v != "" {
		if o, ok := ironlinkv1.ReleaseOutcome_value["RELEASE_OUTCOME_"+v]; ok && o != 0 {
			holds := resp.GetQuarantineHolds()
			var agrees bool
			switch ironlinkv1.ReleaseOutcome(o) {
			case ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_RESTORED_OFFERED, ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_RESTORED_NOT_OFFERED:
				agrees = cmdDesired == ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED || cmdDesired == ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED_UNOFFERED
			case ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_NOT_QUARANTINED:
				agrees = len(holds) == 0
			default:
				agrees = len(holds) > 0
			}
			if agrees {
				d.Released = &releaseResult{Outcome: ironlinkv1.ReleaseOutcome(o)}
				for _, h := range holds {
					d.Released.Remaining = append(d.Released.Remaining, h.GetHolder())
				}
			}
		}
	}
	title := dev.GetName()
	if title == "" {
		title = dev.GetDeviceId()
	}
	s.render(w, r, http.StatusOK, "device", title, d)
}

// deviceTimeline turns the histories (newest first, as the API returns
// them) into the chart's lanes.
func deviceTimeline(now time.Time, dev *ironlinkv1.Device, sh []*ironlinkv1.StatusChange, ch []conditionChange, ih []*ironlinkv1.ImpairmentChange) timelineSVG {
	status := tlLane{Label: "operational status", Prefix: "st-"}
	for _, c := range sh {
		status.Points = append(status.Points, tlPoint{At: c.GetChangeTime().AsTime(), State: statusName(c.GetStatus()), Title: " · " + c.GetReason()})
	}
	if len(status.Points) == 0 && dev.GetStatusChangeTime() != nil {
		status.Points = append(status.Points, tlPoint{At: dev.GetStatusChangeTime().AsTime(), State: statusName(dev.GetStatus()), Title: " · " + dev.GetStatusReason()})
	}
	lanes := []tlLane{status}
	byType := map[string][]conditionChange{}
	for _, c := range ch {
		byType[c.Type] = append(byType[c.Type], c)
	}
	for _, c := range dev.GetConditions() {
		lane := tlLane{Label: c.GetType(), Prefix: lanePrefix(c.GetType())}
		hist := byType[c.GetType()]
		// Oldest first: a row starts a segment at its transition time when
		// the status changed, else (reason or message only) when observed.
		prev := ""
		for i := len(hist) - 1; i >= 0; i-- {
			h := hist[i]
			at := h.ObservedTime
			if h.Status != prev {
				at = h.LastTransitionTime
			}
			prev = h.Status
			title := " · " + h.Reason
			if h.Message != "" {
				title += ": " + h.Message
			}
			lane.Points = append(lane.Points, tlPoint{At: at, State: h.Status, Title: title})
		}
		if len(lane.Points) == 0 {
			lane.Points = append(lane.Points, tlPoint{At: c.GetLastTransitionTime().AsTime(), State: condName(c.GetStatus()), Title: " · " + c.GetReason()})
		}
		lanes = append(lanes, lane)
	}
	var marks []tlMark
	for _, c := range ih {
		name := impName(c.GetDesired())
		marks = append(marks, tlMark{At: c.GetChangeTime().AsTime(), Class: "imp-" + name,
			Title: fmt.Sprintf("%s (generation %d) by %s at %s: %s", name, c.GetGeneration(), c.GetActor(),
				c.GetChangeTime().AsTime().UTC().Format(time.DateTime), c.GetReason())})
	}
	return buildTimeline(now, lanes, marks)
}

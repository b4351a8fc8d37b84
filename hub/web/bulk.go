package web

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/fleet"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/devsel"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// Bulk quarantine and release from the device list (docs/reference/web.md
// "Acting on several devices"): every device a selector matches, through
// BulkService exactly as `ironlink quarantine --selector` (a preview with
// the count, then the call carrying that count, refused when the fleet
// moved meanwhile, all in one transaction), or the rows ticked in the
// list: the same preview (devices, count, for a release the devices per
// outcome), then each device's QuarantineDevice or ReleaseDevice once
// every one of them has passed the API's checks (a release's
// validate_only plan, a quarantine's device lookup), so a bad name,
// reason or scope writes nothing.

// bulkForm is a bulk preview or confirmation as posted.
type bulkForm struct {
	Verb     string // quarantine or release
	Selector string // the selector, or ""
	Devices  []string
	AllHolds bool
	Reason   string
	Expected int
}

// bulkPreview is what the preview page shows.
type bulkPreview struct {
	bulkForm
	Count   int
	Devices []*ironlinkv1.BulkMatch
	Counts  []*ironlinkv1.ReleaseOutcomeCount
	More    int // devices matched beyond those listed
}

// bulkDone is what the result page shows.
type bulkDone struct {
	bulkForm
	RequestID string
	Commands  []*ironlinkv1.OperatorCommand
	Counts    []*ironlinkv1.ReleaseOutcomeCount
	Plans     []*ironlinkv1.ReleasePlan
}

// maxTicked bounds the rows one form may tick (BulkService's preview
// lists as many).
const maxTicked = fleet.MaxPreviewDevices

func readBulkForm(r *http.Request, confirm bool) (bulkForm, error) {
	f := bulkForm{Verb: r.PostForm.Get("verb"), Selector: strings.TrimSpace(r.PostForm.Get("selector")),
		AllHolds: r.PostForm.Get("all_holds") == "on", Reason: r.PostForm.Get("reason")}
	if f.Verb != "quarantine" && f.Verb != "release" {
		return f, fmt.Errorf("verb %q is neither quarantine nor release", f.Verb)
	}
	for _, d := range r.PostForm["device"] {
		if d = strings.TrimSpace(d); d != "" && !slices.Contains(f.Devices, d) {
			f.Devices = append(f.Devices, d)
		}
	}
	switch {
	case f.Selector == "" && len(f.Devices) == 0:
		return f, fmt.Errorf("no device ticked and no selector: tick the devices to %s", f.Verb)
	case f.Selector != "" && len(f.Devices) > 0:
		return f, fmt.Errorf("give a selector or ticked devices, not both")
	case len(f.Devices) > maxTicked:
		return f, fmt.Errorf("%d devices ticked: at most %d at once (use a selector)", len(f.Devices), maxTicked)
	}
	if confirm {
		n, err := strconv.Atoi(r.PostForm.Get("expected_count"))
		if err != nil || n < 1 {
			return f, fmt.Errorf("expected_count %q: give the number of devices the preview showed, 1 or more", r.PostForm.Get("expected_count"))
		}
		f.Expected = n
	}
	return f, nil
}

// bulkPreviewPage handles POST /devices/bulk/preview.
func (s *Server) bulkPreviewPage(w http.ResponseWriter, r *http.Request, id Identity) {
	if !s.writeForm(w, r, id, "quarantine or release devices") {
		return
	}
	f, err := readBulkForm(r, false)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ctx := apiContext(r.Context(), id)
	var p bulkPreview
	if f.Selector != "" {
		p, err = s.previewSelector(ctx, f)
	} else {
		p, err = s.previewTicked(ctx, f, "preview")
	}
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "bulk", "Confirm "+f.Verb, p)
}

func (s *Server) previewSelector(ctx context.Context, f bulkForm) (bulkPreview, error) {
	p := bulkPreview{bulkForm: f}
	sel, err := devsel.Parse(f.Selector, "selector")
	if err != nil {
		return p, badInput("selector", err)
	}
	resp, err := s.fleet.Bulk().PreviewBulkImpairment(ctx, &ironlinkv1.PreviewBulkImpairmentRequest{Selector: sel, AllHolds: f.AllHolds})
	if err != nil {
		return p, err
	}
	p.Selector = devsel.Format(sel)
	p.Count, p.Devices = int(resp.GetCount()), resp.GetDevices()
	p.More = p.Count - len(p.Devices)
	if f.Verb == "release" {
		p.Counts = resp.GetReleaseCounts()
	}
	return p, nil
}

// previewTicked looks each ticked device up (and plans its release) with
// the API's own handlers; the first refusal is the answer.
func (s *Server) previewTicked(ctx context.Context, f bulkForm, reason string) (bulkPreview, error) {
	p := bulkPreview{bulkForm: f}
	var plans []*ironlinkv1.ReleasePlan
	for _, ref := range f.Devices {
		d, err := s.fleet.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceName: ref, HistoryLimit: 1})
		if err != nil {
			return p, err
		}
		dev := d.GetDevice()
		p.Devices = append(p.Devices, &ironlinkv1.BulkMatch{DeviceId: dev.GetDeviceId(), Site: dev.GetSite(), Name: dev.GetName(), Status: dev.GetStatus()})
		if f.Verb == "release" {
			rr, err := s.fleet.ReleaseDevice(ctx, &ironlinkv1.ReleaseDeviceRequest{DeviceId: dev.GetDeviceId(), Reason: reason, AllHolds: f.AllHolds, ValidateOnly: true})
			if err != nil {
				return p, err
			}
			plans = append(plans, rr.GetPlan())
		}
	}
	p.Count = len(p.Devices)
	p.Counts = countPlans(plans)
	return p, nil
}

// countPlans groups release plans by outcome and remaining holders, in
// first-seen order, as BulkService counts them.
func countPlans(plans []*ironlinkv1.ReleasePlan) []*ironlinkv1.ReleaseOutcomeCount {
	var out []*ironlinkv1.ReleaseOutcomeCount
	for _, pl := range plans {
		var holders []string
		for _, h := range pl.GetRemainingHolds() {
			holders = append(holders, h.GetHolder())
		}
		slices.Sort(holders)
		i := slices.IndexFunc(out, func(c *ironlinkv1.ReleaseOutcomeCount) bool {
			return c.GetOutcome() == pl.GetOutcome() && slices.Equal(c.GetHolders(), holders)
		})
		if i < 0 {
			out = append(out, &ironlinkv1.ReleaseOutcomeCount{Outcome: pl.GetOutcome(), Holders: holders})
			i = len(out) - 1
		}
		out[i].Count++
	}
	return out
}

// bulkConfirm handles POST /devices/bulk: the confirmed call.
func (s *Server) bulkConfirm(w http.ResponseWriter, r *http.Request, id Identity) {
	if !s.writeForm(w, r, id, "quarantine or release devices") {
		return
	}
	f, err := readBulkForm(r, true)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ctx := apiContext(r.Context(), id)
	var done bulkDone
	if f.Selector != "" {
		done, err = s.bulkSelector(ctx, f)
	} else {
		done, err = s.bulkTicked(ctx, f)
	}
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	s.log.Info("fleet view: bulk impairment requested", "client_id", id.ClientID, "verb", f.Verb, "selector", f.Selector,
		"devices", len(f.Devices), "commands", len(done.Commands), "request_id", done.RequestID, "via", id.Via)
	s.render(w, r, http.StatusOK, "bulkdone", strings.ToUpper(f.Verb[:1])+f.Verb[1:]+" requested", done)
}

func (s *Server) bulkSelector(ctx context.Context, f bulkForm) (bulkDone, error) {
	done := bulkDone{bulkForm: f}
	sel, err := devsel.Parse(f.Selector, "selector")
	if err != nil {
		return done, badInput("selector", err)
	}
	if f.Verb == "quarantine" {
		resp, err := s.fleet.Bulk().BulkQuarantine(ctx, &ironlinkv1.BulkQuarantineRequest{Selector: sel, Reason: f.Reason, ExpectedCount: int32(f.Expected)})
		if err != nil {
			return done, err
		}
		done.RequestID, done.Commands = resp.GetRequestId(), resp.GetCommands()
		return done, nil
	}
	resp, err := s.fleet.Bulk().BulkRelease(ctx, &ironlinkv1.BulkReleaseRequest{Selector: sel, Reason: f.Reason, ExpectedCount: int32(f.Expected), AllHolds: f.AllHolds})
	if err != nil {
		return done, err
	}
	done.RequestID, done.Commands, done.Counts = resp.GetRequestId(), resp.GetCommands(), resp.GetCounts()
	return done, nil
}

// bulkTicked checks every ticked device first (nothing is written when
// one fails), then quarantines or releases each.
func (s *Server) bulkTicked(ctx context.Context, f bulkForm) (bulkDone, error) {
	done := bulkDone{bulkForm: f}
	if f.Expected != len(f.Devices) {
		return done, countMismatch(f.Expected, len(f.Devices))
	}
	if err := checkReason(f.Reason); err != nil {
		return done, err
	}
	p, err := s.previewTicked(ctx, f, f.Reason)
	if err != nil {
		return done, err
	}
	for _, d := range p.Devices {
		var cmd *ironlinkv1.OperatorCommand
		if f.Verb == "quarantine" {
			resp, err := s.fleet.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: d.GetDeviceId(), Reason: f.Reason})
			if err != nil {
				return done, err
			}
			cmd = resp.GetCommand()
		} else {
			resp, err := s.fleet.ReleaseDevice(ctx, &ironlinkv1.ReleaseDeviceRequest{DeviceId: d.GetDeviceId(), Reason: f.Reason, AllHolds: f.AllHolds})
			if err != nil {
				return done, err
			}
			cmd = resp.GetCommand()
			done.Plans = append(done.Plans, resp.GetPlan())
		}
		if cmd != nil {
			done.Commands = append(done.Commands, cmd)
		}
	}
	done.Counts = countPlans(done.Plans)
	return done, nil
}

// checkReason is the API's check of a quarantine's or release's reason
// (hub/fleet), made before the first device is written.
func checkReason(reason string) error {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return grpcerr.InvalidArgument("reason", grpcerr.ReasonRequired, "reason is required: say why (it is kept in every device's quarantine history)")
	}
	if err := textcheck.Text("reason", reason, fleet.MaxReasonBytes); err != nil {
		return grpcerr.FromCheck(err)
	}
	return nil
}

// countMismatch refuses ticked devices whose number is not the one the
// preview showed.
func countMismatch(expected, got int) error {
	return grpcerr.FailedPrecondition(grpcerr.ReasonCountMismatch, fmt.Sprintf(
		"the form names %d devices, not the expected %d: nothing was changed; preview again", got, expected))
}

// badInput is a form field the API would refuse, as InvalidArgument.
func badInput(field string, err error) error {
	return grpcerr.InvalidArgument(field, grpcerr.ReasonInvalidValue, err.Error())
}

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
)

// Bulk quarantine and release from the device list (docs/reference/web.md
// "Acting on several devices"): every device a selector matches, through
// BulkService exactly as `ironlink quarantine --selector` (a preview with
// the count, then the call carrying that count, refused when the fleet
// moved meanwhile, all in one transaction), or the rows ticked in the
// list: resolved to device ids, then the same BulkService preview and
// call with DeviceSelector.device_ids and the previewed count, so the
// ticked rows too change in one transaction and a bad name, reason or
// scope writes nothing.

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
		p, err = s.previewTicked(ctx, f)
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

// tickedIDs resolves the ticked rows (names or ids) to device ids with
// the API's own lookup; the first refusal (unknown name, another site) is
// the answer.
func (s *Server) tickedIDs(ctx context.Context, f bulkForm) ([]string, error) {
	ids := make([]string, 0, len(f.Devices))
	for _, ref := range f.Devices {
		d, err := s.fleet.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceName: ref, HistoryLimit: 1})
		if err != nil {
			return nil, err
		}
		ids = append(ids, d.GetDevice().GetDeviceId())
	}
	return ids, nil
}

// previewTicked previews the ticked rows through BulkService, selected by
// their ids (DeviceSelector.device_ids).
func (s *Server) previewTicked(ctx context.Context, f bulkForm) (bulkPreview, error) {
	p := bulkPreview{bulkForm: f}
	ids, err := s.tickedIDs(ctx, f)
	if err != nil {
		return p, err
	}
	resp, err := s.fleet.Bulk().PreviewBulkImpairment(ctx, &ironlinkv1.PreviewBulkImpairmentRequest{
		Selector: &ironlinkv1.DeviceSelector{DeviceIds: ids}, AllHolds: f.AllHolds})
	if err != nil {
		return p, err
	}
	p.Count, p.Devices = int(resp.GetCount()), resp.GetDevices()
	if f.Verb == "release" {
		p.Counts = resp.GetReleaseCounts()
	}
	return p, nil
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
	sel, err := devsel.Parse(f.Selector, "selector")
	if err != nil {
		return bulkDone{bulkForm: f}, badInput("selector", err)
	}
	return s.bulkCall(ctx, f, sel)
}

// bulkCall quarantines or releases the devices sel matches through
// BulkService, carrying the count the preview showed: one transaction.
func (s *Server) bulkCall(ctx context.Context, f bulkForm, sel *ironlinkv1.DeviceSelector) (bulkDone, error) {
	done := bulkDone{bulkForm: f}
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

// bulkTicked resolves the ticked rows to ids and acts on them through
// BulkService in one transaction (DeviceSelector.device_ids with the
// previewed count): a device gone or moved meanwhile, a bad reason or a
// scope refusal writes nothing.
func (s *Server) bulkTicked(ctx context.Context, f bulkForm) (bulkDone, error) {
	if f.Expected != len(f.Devices) {
		return bulkDone{bulkForm: f}, countMismatch(f.Expected, len(f.Devices))
	}
	ids, err := s.tickedIDs(ctx, f)
	if err != nil {
		return bulkDone{bulkForm: f}, err
	}
	return s.bulkCall(ctx, f, &ironlinkv1.DeviceSelector{DeviceIds: ids})
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

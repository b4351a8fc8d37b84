package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/store"
)

type commandData struct {
	Cmd   *ironlinkv1.OperatorCommand
	State string
	Final bool
	Error string
	// Release is what the release that created Cmd did (nil for other
	// commands); with Cmd nil, a release that wrote no command.
	Release *releaseResult
}

// releaseResult is what a release call did, as the page shows it: its
// outcome, the holds it released and the holds that remain (the device
// stays quarantined while any does).
type releaseResult struct {
	Outcome   ironlinkv1.ReleaseOutcome
	Released  []string
	Remaining []string
}

// newReleaseResult is what plan says the release did.
func newReleaseResult(p *ironlinkv1.ReleasePlan) *releaseResult {
	rr := &releaseResult{Outcome: p.GetOutcome(), Released: p.GetReleasedHolders()}
	for _, h := range p.GetRemainingHolds() {
		rr.Remaining = append(rr.Remaining, h.GetHolder())
	}
	return rr
}

func newCommandData(c *ironlinkv1.OperatorCommand) *commandData {
	st := strings.TrimPrefix(c.GetState().String(), "COMMAND_STATE_")
	return &commandData{Cmd: c, State: st, Final: st == "SUCCEEDED" || st == "FAILED" || st == "SUPERSEDED"}
}

// impair handles a quarantine or release POST: operations:write or 403
// (nothing written), a reason, then fleet's own RPC handler. A fetch (with
// FragmentHeader) gets the command's progress fragment; a plain form POST is
// redirected to the device page showing it.
func (s *Server) impair(desired store.Impairment) func(http.ResponseWriter, *http.Request, Identity) {
	return func(w http.ResponseWriter, r *http.Request, id Identity) {
		devID := r.PathValue("id")
		if !id.CanWrite() {
			s.log.Warn("fleet view write refused: no operations:write", "client_id", id.ClientID, "device_id", devID, "desired", desired)
			s.fail(w, r, http.StatusForbidden, fmt.Sprintf("client %s lacks the operations:write scope: it may look, not quarantine or release", id.ClientID))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		if err := r.ParseForm(); err != nil {
			s.fail(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error())
			return
		}
		ctx := apiContext(r.Context(), id)
		reason := r.PostForm.Get("reason")
		var cmd *ironlinkv1.OperatorCommand
		var release *releaseResult
		var err error
		if desired == store.ImpairmentQuarantined {
			var resp *ironlinkv1.QuarantineDeviceResponse
			resp, err = s.fleet.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: devID, Reason: reason})
			cmd = resp.GetCommand()
		} else {
			var resp *ironlinkv1.ReleaseDeviceResponse
			resp, err = s.fleet.ReleaseDevice(ctx, &ironlinkv1.ReleaseDeviceRequest{DeviceId: devID, Reason: reason, AllHolds: r.PostForm.Get("all_holds") == "on"})
			cmd = resp.GetCommand()
			if resp.GetPlan() != nil {
				release = newReleaseResult(resp.GetPlan())
			}
		}
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		// The device page says what a release did (?release=OUTCOME: which
		// holds remain), and follows its command, if it wrote one (a release
		// of a device that is not quarantined writes none).
		q := url.Values{}
		if release != nil {
			q.Set("release", strings.TrimPrefix(release.Outcome.String(), "RELEASE_OUTCOME_"))
		}
		if cmd != nil {
			s.log.Info("fleet view: impairment requested", "client_id", id.ClientID, "device_id", cmd.GetDeviceId(),
				"desired", desired, "command_id", cmd.GetCommandId(), "via", id.Via)
			devID = cmd.GetDeviceId()
			q.Set("command", cmd.GetCommandId())
		}
		if isFragment(r) {
			d := &commandData{Release: release}
			if cmd != nil {
				d = newCommandData(cmd)
				d.Release = release
			}
			s.render(w, r, http.StatusOK, "command", "Command", d)
			return
		}
		target := "/devices/" + url.PathEscape(devID)
		if len(q) > 0 {
			target += "?" + q.Encode()
		}
		http.Redirect(w, r, target, http.StatusSeeOther)
	}
}

func (s *Server) command(w http.ResponseWriter, r *http.Request, id Identity) {
	resp, err := s.fleet.GetCommand(apiContext(r.Context(), id), &ironlinkv1.GetCommandRequest{CommandId: r.PathValue("id")})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "command", "Command", newCommandData(resp.GetCommand()))
}

// offer handles POST /devices/{id}/offer (form: reason): FleetService's
// OfferDevice, offering a device that is not quarantined to customers. A
// fetch (with FragmentHeader) gets the command's progress fragment; a plain
// form POST is redirected to the device page showing it.
func (s *Server) offer(w http.ResponseWriter, r *http.Request, id Identity) {
	if !s.writeForm(w, r, id, "offer devices") {
		return
	}
	resp, err := s.fleet.OfferDevice(apiContext(r.Context(), id), &ironlinkv1.OfferDeviceRequest{DeviceId: r.PathValue("id"), Reason: r.PostForm.Get("reason")})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	cmd := resp.GetCommand()
	s.log.Info("fleet view: offer requested", "client_id", id.ClientID, "device_id", cmd.GetDeviceId(), "command_id", cmd.GetCommandId(), "via", id.Via)
	if isFragment(r) { // the device page's form (data-async): the command's progress, as for quarantine and release
		s.render(w, r, http.StatusOK, "command", "Command", newCommandData(cmd))
		return
	}
	http.Redirect(w, r, "/devices/"+url.PathEscape(cmd.GetDeviceId())+"?command="+url.QueryEscape(cmd.GetCommandId()), http.StatusSeeOther)
}

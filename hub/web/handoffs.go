package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// The repair handoffs page (docs/reference/web.md "Handoffs"): every
// handoff of the remediation ladders as `ironlink handoffs` lists them,
// with each webhook delivery, and Close for operations:write, through
// RemediationService's own handlers.

type handoffsData struct {
	Filter   url.Values
	Handoffs []*ironlinkv1.Handoff
	CanWrite bool
}

// needRem answers 404 when the hub serves no remediation API.
func (s *Server) needRem(w http.ResponseWriter, r *http.Request) bool {
	if s.rem == nil {
		s.fail(w, r, http.StatusNotFound, "this hub's fleet view has no remediation API")
		return false
	}
	return true
}

// handoffs handles GET /handoffs: ?site, ?device (name, SITE/NAME or
// id), ?open=1 (open ones only); at most 200, newest first.
func (s *Server) handoffs(w http.ResponseWriter, r *http.Request, id Identity) {
	if !s.needRem(w, r) {
		return
	}
	q := r.URL.Query()
	resp, err := s.rem.ListHandoffs(apiContext(r.Context(), id), &ironlinkv1.ListHandoffsRequest{Site: q.Get("site"), Device: q.Get("device"),
		OpenOnly: q.Get("open") == "1", PageSize: 200})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "handoffs", "Repair handoffs", handoffsData{Filter: q, Handoffs: resp.GetHandoffs(), CanWrite: id.CanWrite()})
}

// closeHandoff handles POST /handoffs/{id}/close (form: note, back).
func (s *Server) closeHandoff(w http.ResponseWriter, r *http.Request, id Identity) {
	if !s.needRem(w, r) || !s.writeForm(w, r, id, "close repair handoffs") {
		return
	}
	hid, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || hid <= 0 {
		s.apiFail(w, r, badInput("id", fmt.Errorf("handoff id %q is not a positive number", r.PathValue("id"))))
		return
	}
	resp, err := s.rem.CloseHandoff(apiContext(r.Context(), id), &ironlinkv1.CloseHandoffRequest{Id: hid, Note: r.PostForm.Get("note")})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	h := resp.GetHandoff()
	s.log.Info("fleet view: handoff closed", "client_id", id.ClientID, "device_id", h.GetDeviceId(), "handoff", h.GetId(), "via", id.Via)
	http.Redirect(w, r, backTo(r.PostForm.Get("back"), "/handoffs"), http.StatusSeeOther)
}

func init() {
	// lastAttempt is a handoff's newest webhook delivery attempt (nil: none).
	funcs["lastAttempt"] = func(h *ironlinkv1.Handoff) *ironlinkv1.HandoffWebhookAttempt {
		if l := h.GetWebhookAttemptLog(); len(l) > 0 {
			return l[len(l)-1]
		}
		return nil
	}
}

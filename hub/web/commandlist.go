package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/devref"
)

type commandsData struct {
	Cmds []*ironlinkv1.OperatorCommand
	// Names are the commands' devices' names by id (the device column).
	Names    map[string]string
	Filter   url.Values
	States   []option
	NextHref string
	CanWrite bool
}

// commands handles GET /commands: FleetService.ListCommands with ?site,
// ?device (name, SITE/NAME or id), ?state (repeatable), ?request_id and
// ?page (the API's page token).
func (s *Server) commands(w http.ResponseWriter, r *http.Request, id Identity) {
	q := r.URL.Query()
	req := &ironlinkv1.ListCommandsRequest{Site: q.Get("site"), RequestId: q.Get("request_id"), PageSize: 100, PageToken: q.Get("page")}
	if dv := strings.TrimSpace(q.Get("device")); dv != "" {
		ref, err := devref.Parse(dv)
		if err != nil {
			s.apiFail(w, r, badInput("device", fmt.Errorf("device %q: %w", dv, err)))
			return
		}
		req.DeviceId, req.DeviceName = ref.ID, ref.Name
		if ref.Site != "" {
			req.Site = ref.Site
		}
	}
	for _, v := range q["state"] {
		if v == "" {
			continue
		}
		st, ok := ironlinkv1.CommandState_value["COMMAND_STATE_"+strings.ToUpper(v)]
		if !ok || st == 0 {
			s.apiFail(w, r, badInput("state", fmt.Errorf("state %q is not a command state (PENDING, SENT, SUCCEEDED, FAILED, SUPERSEDED)", v)))
			return
		}
		req.States = append(req.States, ironlinkv1.CommandState(st))
	}
	resp, err := s.fleet.ListCommands(apiContext(r.Context(), id), req)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	ids := make([]string, len(resp.GetCommands()))
	for i, c := range resp.GetCommands() {
		ids[i] = c.GetDeviceId()
	}
	names, err := deviceNames(r.Context(), s.store.Pool(), ids)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	d := commandsData{Cmds: resp.GetCommands(), Names: names, Filter: q, CanWrite: id.CanWrite()}
	for _, n := range []string{"PENDING", "SENT", "SUCCEEDED", "FAILED", "SUPERSEDED"} {
		d.States = append(d.States, option{Value: n, Label: n, Selected: hasValue(q["state"], n)})
	}
	if t := resp.GetNextPageToken(); t != "" {
		next := url.Values{}
		for k, vs := range q {
			next[k] = vs
		}
		next.Set("page", t)
		d.NextHref = "/commands?" + next.Encode()
	}
	s.render(w, r, http.StatusOK, "commands", "Commands", d)
}

// retryCommand handles POST /commands/{id}/retry (form: reason):
// FleetService.RetryCommand of a FAILED command.
func (s *Server) retryCommand(w http.ResponseWriter, r *http.Request, id Identity) {
	if !s.writeForm(w, r, id, "retry commands") {
		return
	}
	resp, err := s.fleet.RetryCommand(apiContext(r.Context(), id), &ironlinkv1.RetryCommandRequest{CommandId: r.PathValue("id"), Reason: r.PostForm.Get("reason")})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	c := resp.GetCommand()
	s.log.Info("fleet view: command retried", "client_id", id.ClientID, "command_id", c.GetCommandId(), "device_id", c.GetDeviceId(), "via", id.Via)
	http.Redirect(w, r, "/devices/"+url.PathEscape(c.GetDeviceId())+"?command="+url.QueryEscape(c.GetCommandId()), http.StatusSeeOther)
}

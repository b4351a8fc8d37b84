package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

type commandsData struct {
	Cmds     []cmdRow
	Filter   url.Values
	SelText  string
	Heads    []sortHead
	States   []option
	NextHref string
	CanWrite bool
}

// cmdRow is one command of the list, with the columns it shows.
type cmdRow struct {
	ID, DeviceID, Name, Site, Desired, Holder, State string
	Attempts                                         int
	Actor, Source, Reason, LastError                 string
	Created                                          time.Time
}

// cmdColumns are the command list's sort keys; name (the device's) is the
// default, newest first within a device.
var cmdColumns = []listCol{
	{"created", "created", "c.created_at"}, {"name", "device", "coalesce(d.name, '')"}, {"site", "site", "c.site"},
	{"action", "action", "c.desired"}, {"state", "state", "c.state"}, {"attempts", "attempts", "c.attempts"},
	{"who", "who", "c.actor"}, {"why", "why", "c.reason"}, {"error", "error", "c.last_error"},
}

// commandStates are the states the filter offers (FleetService's).
var commandStates = []string{"PENDING", "SENT", "SUCCEEDED", "FAILED", "SUPERSEDED"}

// commands handles GET /commands: FleetService.ListCommands' filters
// ?site, ?device (name, SITE/NAME or id), ?state (repeatable),
// ?request_id, and ?selector (the CLI's syntax: the commands of the
// devices it selects), ?sort ([-]column; by device name, newest first
// within one, without it) and ?offset. The order is any column's, so the
// page reads the commands table itself (listCommands).
func (s *Server) commands(w http.ResponseWriter, r *http.Request, id Identity) {
	q := r.URL.Query()
	ctx := apiContext(r.Context(), id)
	sel, hasSel, handled := s.deviceSelection(w, r, ctx, q, id)
	if handled {
		return
	}
	f := cmdListFilter{Sites: id.Sites}
	var err error
	if f.Site, err = s.listSite(ctx, q.Get("site")); err != nil {
		s.apiFail(w, r, err)
		return
	}
	if rid := strings.TrimSpace(q.Get("request_id")); rid != "" {
		u, err := uuid.Parse(rid)
		if err != nil {
			s.apiFail(w, r, badInput("request_id", fmt.Errorf("request_id %q is not a UUID", rid)))
			return
		}
		f.RequestID = u.String()
	}
	if dv := strings.TrimSpace(q.Get("device")); dv != "" {
		d, err := s.getDevice(ctx, dv, 1)
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		f.DeviceID = d.GetDevice().GetDeviceId()
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
		f.States = append(f.States, strings.ToUpper(v))
	}
	if f.Order, err = parseListOrder(q.Get("sort"), cmdColumns, "name"); err != nil {
		s.apiFail(w, r, err)
		return
	}
	if f.Offset, err = parseOffset(q.Get("offset")); err != nil {
		s.apiFail(w, r, err)
		return
	}
	if hasSel {
		f.Sel = &sel
	}
	rows, more, err := listCommands(ctx, s.store.Pool(), f)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	d := commandsData{Cmds: rows, Filter: q, SelText: sel.SelText, CanWrite: id.CanWrite(), Heads: f.Order.heads("/commands", q, cmdColumns, "name")}
	for _, n := range commandStates {
		d.States = append(d.States, option{Value: n, Label: n, Selected: hasValue(q["state"], n)})
	}
	if more {
		d.NextHref = nextHref("/commands", q, f.Offset)
	}
	s.render(w, r, http.StatusOK, "commands", "Commands", d)
}

// cmdListFilter is the command list's filter and order.
type cmdListFilter struct {
	Site      string
	Sites     []string // the caller's sites (nil: every site)
	DeviceID  string
	RequestID string
	States    []string
	Sel       *listFilter // the selector's devices, when one is given
	Order     listOrder
	Offset    int
}

// listCommands reads one page of commands in f's order, and whether more
// follow: one statement.
func listCommands(ctx context.Context, pool *pgxpool.Pool, f cmdListFilter) ([]cmdRow, bool, error) {
	where, args := deviceRowsCond("c", f.Sel, f.Site, f.Sites, f.DeviceID)
	if f.RequestID != "" {
		where += " AND c.request_id = " + args.add(f.RequestID) + "::uuid"
	}
	if len(f.States) > 0 {
		where += " AND c.state = ANY(" + args.add(f.States) + "::text[])"
	}
	rows, err := pool.Query(ctx, `SELECT c.id::text, c.device_id::text, coalesce(d.name, ''), c.site, c.desired, c.holder, c.state,
		c.attempts, c.actor, c.source, c.reason, c.last_error, c.created_at
		FROM commands c LEFT JOIN devices d ON d.id = c.device_id WHERE `+where+`
		ORDER BY `+f.Order.orderBy(cmdColumns, "c.created_at DESC, c.id")+`
		OFFSET `+args.add(f.Offset)+` LIMIT `+args.add(listPageSize+1), args...)
	if err != nil {
		return nil, false, fmt.Errorf("list commands: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (cmdRow, error) {
		var c cmdRow
		err := r.Scan(&c.ID, &c.DeviceID, &c.Name, &c.Site, &c.Desired, &c.Holder, &c.State, &c.Attempts, &c.Actor, &c.Source,
			&c.Reason, &c.LastError, &c.Created)
		return c, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("list commands: %w", err)
	}
	more := len(out) > listPageSize
	if more {
		out = out[:listPageSize]
	}
	return out, more, nil
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

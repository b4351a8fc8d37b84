package web

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/wire"
)

// The events page (docs/reference/web.md "Events"): the changes the hub's
// feed keeps (FleetService.WatchFleet from its oldest change, as `ironlink
// events` reads it) of one device or a site over a time window.

// Events page limits.
const (
	// maxEventsShown: the page keeps the newest this many events of the window.
	maxEventsShown = 500
	// eventsReadFor bounds how long one page reads the feed.
	eventsReadFor = 15 * time.Second
	// eventsQuietFirst ends a read that got no change this long after the
	// stream's first progress mark (an empty feed: the hub sends its next
	// mark only after 5 s); eventsQuiet ends one this long after a change
	// sent while the stream was no longer behind (the feed's end).
	eventsQuietFirst = 2 * time.Second
	eventsQuiet      = 300 * time.Millisecond
)

type eventsData struct {
	Filter  url.Values
	SelText string
	Kinds   []option
	Events  []eventRow
	// From, Until: the window shown.
	From, Until time.Time
	// Cut: the read stopped before the feed's end (eventsReadFor) or more
	// than maxEventsShown events matched (the oldest are left out).
	Cut bool
}

// eventRow is one change in the words of the page.
type eventRow struct {
	At                         time.Time
	Kind, DeviceID, Name, Site string
	Text                       string
}

// maxEventDevices bounds the devices a selector of the events page may
// select (their ids are held while the feed is read).
const maxEventDevices = 100000

// events handles GET /events: ?device (name, SITE/NAME or id) or ?site,
// ?selector (the CLI's syntax: the events of the devices it selects),
// ?kind (repeatable: device_status, command_state, operation_state,
// policy_decision, pending_action, remediation, validation), ?since
// (a duration ago or a time; default 1h), ?until (default now).
func (s *Server) events(w http.ResponseWriter, r *http.Request, id Identity) {
	q := r.URL.Query()
	ctx := apiContext(r.Context(), id)
	now := s.now()
	d := eventsData{Filter: q, Until: now}
	var err error
	if d.From, err = parseAgo("since", cmp.Or(q.Get("since"), "1h"), now); err != nil {
		s.apiFail(w, r, err)
		return
	}
	if u := q.Get("until"); u != "" {
		if d.Until, err = parseAgo("until", u, now); err != nil {
			s.apiFail(w, r, err)
			return
		}
	}
	req := &ironlinkv1.WatchFleetRequest{Site: q.Get("site"), FromOldest: true}
	for _, v := range q["kind"] {
		if v == "" {
			continue
		}
		k, ok := ironlinkv1.FleetEventKind_value["FLEET_EVENT_KIND_"+strings.ToUpper(strings.TrimSpace(v))]
		if !ok || k == 0 {
			s.apiFail(w, r, badInput("kind", fmt.Errorf("kind %q is not a change kind (device_status, command_state, operation_state, ...)", v)))
			return
		}
		req.Kinds = append(req.Kinds, ironlinkv1.FleetEventKind(k))
	}
	for k := ironlinkv1.FleetEventKind(1); k <= ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_VALIDATION; k++ {
		if _, ok := ironlinkv1.FleetEventKind_name[int32(k)]; ok {
			n := strings.ToLower(wire.EnumName(k, "FLEET_EVENT_KIND_"))
			d.Kinds = append(d.Kinds, option{Value: n, Label: strings.ReplaceAll(n, "_", " "), Selected: hasValue(q["kind"], n)})
		}
	}
	sel, hasSel, handled := s.deviceSelection(w, r, ctx, q, id)
	if handled {
		return
	}
	d.SelText = sel.SelText
	var devices map[string]bool // nil: every device
	if hasSel {
		if devices, err = selectedIDs(ctx, s.store.Pool(), sel); err != nil {
			if _, isAPI := status.FromError(err); isAPI {
				s.apiFail(w, r, err)
			} else {
				s.dbFail(w, r, err)
			}
			return
		}
		if req.Site == "" {
			req.Site = sel.Sel.Site
		}
	}
	if ref := q.Get("device"); ref != "" {
		resp, err := s.getDevice(ctx, strings.TrimSpace(ref), 1)
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		dev := resp.GetDevice().GetDeviceId()
		if devices == nil || devices[dev] {
			devices = map[string]bool{dev: true}
		} else {
			devices = map[string]bool{} // the device is not among the selector's
		}
		req.Site = resp.GetDevice().GetSite()
	}
	if err := s.readEvents(ctx, req, devices, &d); err != nil {
		s.apiFail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "events", "Events", d)
}

// readEvents runs WatchFleet in this process from the feed's oldest change
// and keeps the changes of d's window (and of devices, when not nil),
// newest first, until the feed's end, the window's end or eventsReadFor.
func (s *Server) readEvents(ctx context.Context, req *ironlinkv1.WatchFleetRequest, devices map[string]bool, d *eventsData) error {
	ctx, cancel := context.WithTimeout(ctx, eventsReadFor)
	defer cancel()
	msgs := make(chan *ironlinkv1.WatchFleetResponse)
	done := make(chan error, 1)
	go func() {
		done <- s.fleet.WatchFleet(req, &callStream[ironlinkv1.WatchFleetResponse]{ctx: ctx, send: func(m *ironlinkv1.WatchFleetResponse) error {
			select {
			case msgs <- m:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}})
	}()
	var rows []eventRow
	first, quiet := true, eventsQuietFirst
	defer func() {
		cancel()
		<-done
		for i := len(rows) - 1; i >= 0 && len(d.Events) < maxEventsShown; i-- {
			d.Events = append(d.Events, rows[i])
		}
		d.Cut = d.Cut || len(rows) > maxEventsShown
	}()
	for {
		select {
		case err := <-done:
			done <- err // for the deferred wait
			if ctx.Err() != nil {
				d.Cut = true
				return nil
			}
			return err
		case <-time.After(quiet):
			return nil // the feed's end
		case m := <-msgs:
			e := m.GetEvent()
			if e == nil {
				if !first {
					return nil // an idle progress mark: every change was sent
				}
				first = false
				continue
			}
			if m.GetBehind() == nil {
				quiet = eventsQuiet
			}
			at := e.GetEventTime().AsTime()
			if at.After(d.Until) {
				return nil
			}
			row := newEventRow(e)
			if at.Before(d.From) || (devices != nil && !devices[row.DeviceID]) {
				continue
			}
			rows = append(rows, row)
		}
	}
}

// newEventRow says one change in words: "AVAILABLE -> QUARANTINED
// (QuarantinedByOperator)", "quarantine SENT -> SUCCEEDED".
func newEventRow(e *ironlinkv1.FleetEvent) eventRow {
	r := eventRow{At: e.GetEventTime().AsTime(), Kind: strings.ToLower(strings.ReplaceAll(wire.EnumName(e.GetKind(), "FLEET_EVENT_KIND_"), "_", " "))}
	switch {
	case e.GetDeviceStatus() != nil:
		x := e.GetDeviceStatus()
		r.DeviceID, r.Name, r.Site = x.GetDeviceId(), x.GetName(), x.GetSite()
		r.Text = fmt.Sprintf("%s -> %s (%s)", statusName(x.GetPreviousStatus()), statusName(x.GetStatus()), x.GetReason())
	case e.GetCommandState() != nil:
		c := e.GetCommandState().GetCommand()
		r.DeviceID, r.Name, r.Site = c.GetDeviceId(), e.GetCommandState().GetDeviceName(), c.GetSite()
		r.Text = fmt.Sprintf("%s %s -> %s by %s: %s", strings.ToLower(impName(c.GetDesired())),
			wire.EnumName(e.GetCommandState().GetPreviousState(), "COMMAND_STATE_"), wire.EnumName(c.GetState(), "COMMAND_STATE_"), c.GetActor(), c.GetReason())
	case e.GetOperationState() != nil:
		o := e.GetOperationState().GetOperation()
		r.DeviceID, r.Name, r.Site = o.GetDeviceId(), o.GetDeviceName(), o.GetSite()
		r.Text = fmt.Sprintf("%s %s -> %s", wire.EnumName(o.GetKind(), "OPERATION_KIND_"),
			wire.EnumName(e.GetOperationState().GetPreviousState(), "OPERATION_STATE_"), wire.EnumName(o.GetState(), "OPERATION_STATE_"))
	case e.GetPolicyDecision() != nil:
		x := e.GetPolicyDecision().GetDecision()
		r.DeviceID, r.Name, r.Site = x.GetDeviceId(), e.GetPolicyDecision().GetDeviceName(), x.GetSite()
		r.Text = fmt.Sprintf("%s by rule %s: %s %s", strings.ToLower(wire.EnumName(x.GetAction(), "POLICY_ACTION_")), x.GetRule(), x.GetReason(), x.GetDetail())
	case e.GetPendingAction() != nil:
		x := e.GetPendingAction().GetPendingAction()
		r.DeviceID, r.Name, r.Site = x.GetDeviceId(), x.GetDeviceName(), x.GetSite()
		r.Text = fmt.Sprintf("pending action %d %s -> %s", x.GetId(), wire.EnumName(e.GetPendingAction().GetPreviousState(), "PENDING_ACTION_STATE_"),
			wire.EnumName(x.GetState(), "PENDING_ACTION_STATE_"))
	case e.GetRemediation() != nil:
		x := e.GetRemediation()
		r.DeviceID, r.Name, r.Site = x.GetDeviceId(), x.GetDeviceName(), x.GetSite()
		r.Text = strings.TrimSpace(fmt.Sprintf("%s %s step %d %s", x.GetRule(), x.GetEvent(), x.GetStep(), x.GetDetail()))
	case e.GetValidation() != nil:
		x := e.GetValidation()
		r.DeviceID, r.Name, r.Site = x.GetDeviceId(), x.GetDeviceName(), x.GetSite()
		r.Text = strings.TrimSpace(fmt.Sprintf("%s %s %s %s", x.GetEvent(), x.GetCheck(), x.GetResult(), x.GetDetail()))
	}
	return r
}

// selectedIDs are the ids of the devices f's selector selects (at most
// maxEventDevices; more is an error asking for a narrower selector).
func selectedIDs(ctx context.Context, pool *pgxpool.Pool, f listFilter) (map[string]bool, error) {
	args := append(f.args(), maxEventDevices+1)
	rows, err := pool.Query(ctx, `SELECT d.id::text FROM devices d`+f.where()+` LIMIT $16`, args...)
	if err != nil {
		return nil, fmt.Errorf("devices of selector %q: %w", f.SelText, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("devices of selector %q: %w", f.SelText, err)
	}
	if len(ids) > maxEventDevices {
		return nil, badInput("selector", fmt.Errorf("selector %q selects more than %d devices: narrow it (site=, name=)", f.SelText, maxEventDevices))
	}
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

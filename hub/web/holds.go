package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// The holds page (docs/reference/web.md "Holds"): every hold on the
// fleet's devices, as `ironlink holds` lists them (quarantine holds, and
// the policy's exclusions and planned maintenance), with set and clear of
// the latter through PolicyService.SetDeviceHold and ClearDeviceHold.

// holdRow is one hold of one device.
type holdRow struct {
	DeviceID, Site, Name string
	// Kind is quarantine, exclusion or maintenance; Holder the quarantine
	// holder ("operator", "policy:<rule>"), or the hold's author.
	Kind, Holder, Actor, Source, Reason string
	Start                               time.Time
	End                                 *time.Time
}

// holdKindWords are the form's and the page's words for DeviceHoldKind.
var holdKindWords = map[string]ironlinkv1.DeviceHoldKind{
	"exclusion":   ironlinkv1.DeviceHoldKind_DEVICE_HOLD_KIND_EXCLUSION,
	"maintenance": ironlinkv1.DeviceHoldKind_DEVICE_HOLD_KIND_PLANNED_MAINTENANCE,
}

// holdColumns are the hold list's sort keys; name (the device's) is the
// default, then kind and holder.
var holdColumns = []listCol{
	{"name", "device", "d.name"}, {"site", "site", "d.site"}, {"kind", "kind", "h.kind"}, {"holder", "holder", "h.holder"},
	{"from", "from", "h.source"}, {"why", "why", "h.reason"}, {"since", "since", "h.start_at"}, {"until", "until", "h.end_at"},
}

// holdFilter is the hold list's filter and order.
type holdFilter struct {
	Site  string
	Sites []string    // the caller's sites (nil: every site)
	Sel   *listFilter // the selector's devices, when one is given
	Order listOrder
}

// maxHolds bounds the holds one page lists.
const maxHolds = 5000

// listHolds reads the holds in force of the devices f selects, in f's
// order (at most maxHolds): one statement.
func listHolds(ctx context.Context, pool *pgxpool.Pool, f holdFilter) ([]holdRow, error) {
	var args sqlArgs
	where := "NOT d.removed"
	if f.Sel != nil {
		var cond string
		cond, args = selectionCond(*f.Sel, "d.id")
		where += " AND " + cond
	}
	if f.Site != "" {
		where += " AND d.site = " + args.add(f.Site)
	}
	if f.Sites != nil {
		where += " AND d.site = ANY(" + args.add(f.Sites) + "::text[])"
	}
	rows, err := pool.Query(ctx, `
		SELECT d.id::text, d.site, d.name, h.kind, h.holder, h.actor, h.source, h.reason, h.start_at, h.end_at FROM (
			SELECT device_id, 'quarantine' AS kind, holder, actor, source, reason, created_at AS start_at, NULL::timestamptz AS end_at
			FROM quarantine_holds
			UNION ALL
			SELECT device_id, CASE kind WHEN 'EXCLUSION' THEN 'exclusion' ELSE 'maintenance' END, author, author, 'operator-api', reason, starts_at, ends_at
			FROM policy_device_holds WHERE ends_at IS NULL OR ends_at > now()
		) h JOIN devices d ON d.id = h.device_id
		WHERE `+where+`
		ORDER BY `+f.Order.orderBy(holdColumns, "d.site, d.name, d.id, h.kind, h.holder")+` LIMIT `+args.add(maxHolds), args...)
	if err != nil {
		return nil, fmt.Errorf("list holds: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (holdRow, error) {
		var h holdRow
		err := r.Scan(&h.DeviceID, &h.Site, &h.Name, &h.Kind, &h.Holder, &h.Actor, &h.Source, &h.Reason, &h.Start, &h.End)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("list holds: %w", err)
	}
	return out, nil
}

type holdsData struct {
	Site      string
	SelText   string
	Sort      string
	Heads     []sortHead
	Holds     []holdRow
	CanWrite  bool
	HasPolicy bool
}

// holds handles GET /holds: ?site, ?selector (the CLI's syntax: the holds
// of the devices it selects), ?sort ([-]column; by device name without
// it).
func (s *Server) holds(w http.ResponseWriter, r *http.Request, id Identity) {
	q := r.URL.Query()
	ctx := apiContext(r.Context(), id)
	sel, hasSel, handled := s.deviceSelection(w, r, ctx, q, id)
	if handled {
		return
	}
	f := holdFilter{Sites: id.Sites}
	var err error
	if f.Site, err = s.listSite(ctx, q.Get("site")); err != nil {
		s.apiFail(w, r, err)
		return
	}
	if f.Order, err = parseListOrder(q.Get("sort"), holdColumns, "name"); err != nil {
		s.apiFail(w, r, err)
		return
	}
	if hasSel {
		f.Sel = &sel
	}
	hs, err := listHolds(r.Context(), s.store.Pool(), f)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "holds", "Holds", holdsData{Site: f.Site, SelText: sel.SelText, Sort: q.Get("sort"), Holds: hs,
		Heads: f.Order.heads("/holds", q, holdColumns, "name"), CanWrite: id.CanWrite(), HasPolicy: s.policy != nil})
}

// parseWhen reads a hold's start or end: empty (unset), a duration from
// now ("4h", "90m") or a time ("2026-12-03T14:00", RFC 3339, or the
// browser's datetime-local, taken as UTC).
func parseWhen(field, v string, now time.Time) (*timestamppb.Timestamp, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		return timestamppb.New(now.Add(d)), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02 15:04"} {
		if t, err := time.Parse(layout, v); err == nil {
			return timestamppb.New(t), nil
		}
	}
	return nil, badInput(field, fmt.Errorf("%s %q is neither a duration from now (4h) nor a time (2006-01-02T15:04, UTC)", field, v))
}

// holdDevice resolves the form's device (name, SITE/NAME, UUID or id
// prefix) to its id, as the device page does.
func (s *Server) holdDevice(ctx context.Context, ref string) (string, error) {
	d, err := s.getDevice(ctx, strings.TrimSpace(ref), 1)
	if err != nil {
		return "", err
	}
	return d.GetDevice().GetDeviceId(), nil
}

// setHold handles POST /holds (form: device, kind, reason, start, end).
func (s *Server) setHold(w http.ResponseWriter, r *http.Request, id Identity) {
	if !s.needPolicy(w, r) || !s.writeForm(w, r, id, "set holds") {
		return
	}
	ctx := apiContext(r.Context(), id)
	f := r.PostForm
	kind, ok := holdKindWords[f.Get("kind")]
	if !ok {
		s.apiFail(w, r, badInput("kind", fmt.Errorf("kind %q: want exclusion or maintenance", f.Get("kind"))))
		return
	}
	now := s.now()
	start, err := parseWhen("start", f.Get("start"), now)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	end, err := parseWhen("end", f.Get("end"), now)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	dev, err := s.holdDevice(ctx, f.Get("device"))
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	if _, err := s.policy.SetDeviceHold(ctx, &ironlinkv1.SetDeviceHoldRequest{DeviceId: dev, Kind: kind, Reason: f.Get("reason"), StartTime: start, EndTime: end}); err != nil {
		s.apiFail(w, r, err)
		return
	}
	s.log.Info("fleet view: hold set", "client_id", id.ClientID, "device_id", dev, "kind", kind.String(), "via", id.Via)
	http.Redirect(w, r, backTo(f.Get("back"), "/holds"), http.StatusSeeOther)
}

// clearHold handles POST /holds/clear (form: device, kind).
func (s *Server) clearHold(w http.ResponseWriter, r *http.Request, id Identity) {
	if !s.needPolicy(w, r) || !s.writeForm(w, r, id, "clear holds") {
		return
	}
	ctx := apiContext(r.Context(), id)
	f := r.PostForm
	kind, ok := holdKindWords[f.Get("kind")]
	if !ok {
		s.apiFail(w, r, badInput("kind", fmt.Errorf("kind %q: want exclusion or maintenance", f.Get("kind"))))
		return
	}
	dev, err := s.holdDevice(ctx, f.Get("device"))
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	if _, err := s.policy.ClearDeviceHold(ctx, &ironlinkv1.ClearDeviceHoldRequest{DeviceId: dev, Kind: kind}); err != nil {
		s.apiFail(w, r, err)
		return
	}
	s.log.Info("fleet view: hold cleared", "client_id", id.ClientID, "device_id", dev, "kind", kind.String(), "via", id.Via)
	http.Redirect(w, r, backTo(f.Get("back"), "/holds"), http.StatusSeeOther)
}

// backTo is where a form returns: back when it is a local path of this
// view, else def.
func backTo(back, def string) string {
	u, err := url.Parse(back)
	if back == "" || err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(back, "/") || strings.HasPrefix(back, "//") {
		return def
	}
	return back
}

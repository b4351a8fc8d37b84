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
	"github.com/ironlink/ironlink/internal/sitename"
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

// listHolds reads the holds in force of the devices of sites (nil: every
// site), of site when set, by site, name, kind: one statement.
func listHolds(ctx context.Context, pool *pgxpool.Pool, site string, sites []string) ([]holdRow, error) {
	rows, err := pool.Query(ctx, `
		SELECT d.id::text, d.site, d.name, h.kind, h.holder, h.actor, h.source, h.reason, h.start_at, h.end_at FROM (
			SELECT device_id, 'quarantine' AS kind, holder, actor, source, reason, created_at AS start_at, NULL::timestamptz AS end_at
			FROM quarantine_holds
			UNION ALL
			SELECT device_id, CASE kind WHEN 'EXCLUSION' THEN 'exclusion' ELSE 'maintenance' END, author, author, 'operator-api', reason, starts_at, ends_at
			FROM policy_device_holds WHERE ends_at IS NULL OR ends_at > now()
		) h JOIN devices d ON d.id = h.device_id
		WHERE NOT d.removed AND ($1 = '' OR d.site = $1) AND (NOT $2 OR d.site = ANY($3::text[]))
		ORDER BY d.site, d.name, d.id, h.kind, h.holder LIMIT 5000`, site, sites != nil, sites)
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
	Holds     []holdRow
	CanWrite  bool
	HasPolicy bool
}

// holds handles GET /holds (?site).
func (s *Server) holds(w http.ResponseWriter, r *http.Request, id Identity) {
	site := strings.TrimSpace(r.URL.Query().Get("site"))
	if site != "" && !sitename.Valid(site) {
		s.apiFail(w, r, badInput("site", fmt.Errorf("site %q is not a valid site name", site)))
		return
	}
	hs, err := listHolds(r.Context(), s.store.Pool(), site, id.Sites)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "holds", "Holds", holdsData{Site: site, Holds: hs, CanWrite: id.CanWrite(), HasPolicy: s.policy != nil})
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

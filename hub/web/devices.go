package web

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/authn"
	hubstatus "github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/sitename"
	"github.com/ironlink/ironlink/internal/textcheck"
)

type option struct {
	Value, Label string
	Selected     bool
}

type devicesData struct {
	Filter    listFilter
	Sites     []option
	Statuses  []option
	Imps      []option
	Rows      []listRow
	Total     int
	NextHref  string
	FirstHref string
	Query     string // the filter as a query string, without the cursor
	// Heads are the column heads: label, sort link, arrow.
	Heads []sortHead
	// CanWrite: the bulk actions are offered.
	CanWrite bool
}

// sortHead is one sortable column head of the device list.
type sortHead struct {
	Key, Label, Href, Mark string
}

var listColumns = []struct{ key, label string }{
	{"name", "name"}, {"site", "site"}, {"status", "status"}, {"why", "why"}, {"since", "since"}, {"quarantine", "quarantine"}, {"id", "device id"},
}

// parseListFilter reads the device list's query: site, status (repeatable,
// e.g. FAULTED), impairment (QUARANTINED, RELEASED, NONE; repeatable),
// orphaned=1, warning=1 (a health warning), removed=1, q (name search), selector (the CLI's --selector
// syntax), sort ([-]column), after (cursor), size.
func parseListFilter(q url.Values) (listFilter, error) {
	f := listFilter{Site: strings.TrimSpace(q.Get("site")), Name: strings.TrimSpace(q.Get("q")), Limit: defaultPageSize,
		InstanceMismatch: q.Get("orphaned") != "", HealthWarning: q.Get("warning") != "", IncludeRemoved: q.Get("removed") != ""}
	if f.Site != "" && !sitename.Valid(f.Site) {
		return f, fmt.Errorf("site %q is not a valid site name", f.Site)
	}
	// Length, UTF-8 and control characters: PostgreSQL refuses NUL and
	// invalid UTF-8 in text, which would answer 503 as if it were down.
	if err := textcheck.Line("search", f.Name, maxSearchBytes); err != nil {
		return f, err
	}
	for _, v := range q["status"] {
		for _, one := range strings.Split(v, ",") {
			st := hubstatus.Status(strings.ToUpper(strings.TrimSpace(one)))
			if st == "" {
				continue
			}
			if !st.Valid() {
				return f, fmt.Errorf("status %q is not an operational status", one)
			}
			f.Statuses = append(f.Statuses, st)
		}
	}
	for _, v := range q["impairment"] {
		im := store.Impairment(strings.ToUpper(strings.TrimSpace(v)))
		switch im {
		case "":
		case store.ImpairmentNone, store.ImpairmentQuarantined, store.ImpairmentReleased:
			f.Impairments = append(f.Impairments, im)
		default:
			return f, fmt.Errorf("impairment %q is not QUARANTINED, RELEASED or NONE", v)
		}
	}
	if err := parseSort(&f, q.Get("sort")); err != nil {
		return f, err
	}
	if err := parseSelectorFilter(&f, q.Get("selector")); err != nil {
		return f, err
	}
	if a := q.Get("after"); a != "" {
		u, err := uuid.Parse(a)
		if err != nil {
			return f, fmt.Errorf("after %q is not a device id", a)
		}
		f.After = u.String()
	}
	if sz := q.Get("size"); sz != "" {
		n, err := strconv.Atoi(sz)
		if err != nil || n < 1 || n > maxPageSize {
			return f, fmt.Errorf("size %q is outside 1-%d", sz, maxPageSize)
		}
		f.Limit = n
	}
	return f, nil
}

func (s *Server) devices(w http.ResponseWriter, r *http.Request, id Identity) {
	q := r.URL.Query()
	f, err := parseListFilter(q)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ctx := apiContext(r.Context(), id)
	if sc := authn.CallerScope(ctx); f.Site != "" && !sc.Allows(f.Site) {
		s.apiFail(w, r, sc.Deny(ctx, s.log, "site "+f.Site, f.Site))
		return
	}
	f.Sites = id.Sites
	if len(f.Sel.Labels) > 0 {
		if f.LabelsIndexed, err = store.FileLabelsEmpty(ctx, s.store.Pool()); err != nil {
			s.dbFail(w, r, err)
			return
		}
	}
	rows, more, err := listDevices(ctx, s.store.Pool(), f)
	if err == nil {
		err = addHolders(ctx, s.store.Pool(), rows)
	}
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	total, err := countDevices(ctx, s.store.Pool(), f)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	sites, err := siteNames(ctx, s.store.Pool(), id.Sites)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	if sc := authn.CallerScope(ctx); f.Sel.Site != "" && !sc.Allows(f.Sel.Site) {
		s.apiFail(w, r, sc.Deny(ctx, s.log, "site "+f.Sel.Site, f.Sel.Site))
		return
	}
	d := devicesData{Filter: f, Rows: rows, Total: total, CanWrite: id.CanWrite()}
	for _, c := range listColumns {
		d.Heads = append(d.Heads, sortHead{Key: c.key, Label: c.label, Href: sortHref(q, f, c.key), Mark: sortMark(f, c.key)})
	}
	d.Sites = append(d.Sites, option{Value: "", Label: "all sites", Selected: f.Site == ""})
	for _, name := range sites {
		d.Sites = append(d.Sites, option{Value: name, Label: name, Selected: name == f.Site})
	}
	for _, st := range hubstatus.All {
		d.Statuses = append(d.Statuses, option{Value: string(st), Label: string(st), Selected: slices.Contains(f.Statuses, st)})
	}
	for _, im := range []store.Impairment{store.ImpairmentQuarantined, store.ImpairmentReleased, store.ImpairmentNone} {
		label := strings.ToLower(string(im))
		if im == store.ImpairmentNone {
			label = "never touched"
		}
		d.Imps = append(d.Imps, option{Value: string(im), Label: label, Selected: slices.Contains(f.Impairments, im)})
	}
	base := url.Values{}
	for k, vs := range q {
		if k != "after" {
			base[k] = vs
		}
	}
	d.Query = base.Encode()
	if more {
		next := url.Values{}
		for k, vs := range base {
			next[k] = vs
		}
		next.Set("after", rows[len(rows)-1].ID)
		d.NextHref = "/devices?" + next.Encode()
	}
	if f.After != "" {
		d.FirstHref = "/devices"
		if d.Query != "" {
			d.FirstHref += "?" + d.Query
		}
	}
	s.render(w, r, http.StatusOK, "devices", "Devices", d)
}

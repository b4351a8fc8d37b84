package web

import (
	"net/http"
	"net/url"
	"slices"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	hubstatus "github.com/ironlink/ironlink/hub/status"
)

type matrixCell struct {
	N    int
	Href string
}

type matrixRow struct {
	Site  string
	Href  string
	Cells []matrixCell
	Total int
}

type siteView struct {
	Site     *ironlinkv1.Site
	Href     string
	Stale    bool
	LinkText string
}

type overviewData struct {
	Statuses []hubstatus.Status
	Rows     []matrixRow
	Totals   matrixRow
	Sites    []siteView
}

func devicesHref(site string, st hubstatus.Status) string {
	v := url.Values{}
	if site != "" {
		v.Set("site", site)
	}
	if st != "" {
		v.Set("status", string(st))
	}
	if len(v) == 0 {
		return "/devices"
	}
	return "/devices?" + v.Encode()
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request, id Identity) {
	ctx := apiContext(r.Context(), id)
	sites, err := decorated(s, ctx, "ListSites", &ironlinkv1.ListSitesRequest{}, s.fleet.ListSites)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	counts, err := countBySiteStatus(ctx, s.store.Pool(), id.Sites)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	d := overviewData{Statuses: hubstatus.All}
	idx := map[hubstatus.Status]int{}
	for i, st := range hubstatus.All {
		idx[st] = i
	}
	bySite := map[string][]int{}
	var names []string
	for _, st := range sites.GetSites() {
		names = append(names, st.GetName())
	}
	for _, c := range counts {
		if _, ok := bySite[c.Site]; !ok {
			bySite[c.Site] = make([]int, len(hubstatus.All))
			if !slices.Contains(names, c.Site) {
				names = append(names, c.Site)
			}
		}
		if i, ok := idx[c.Status]; ok {
			bySite[c.Site][i] += c.N
		}
	}
	slices.Sort(names)
	d.Totals = matrixRow{Site: "all sites", Href: devicesHref("", ""), Cells: make([]matrixCell, len(hubstatus.All))}
	for i, st := range hubstatus.All {
		d.Totals.Cells[i].Href = devicesHref("", st)
	}
	for _, name := range names {
		row := matrixRow{Site: name, Href: devicesHref(name, "")}
		for i, st := range hubstatus.All {
			n := 0
			if c := bySite[name]; c != nil {
				n = c[i]
			}
			row.Cells = append(row.Cells, matrixCell{N: n, Href: devicesHref(name, st)})
			row.Total += n
			d.Totals.Cells[i].N += n
		}
		d.Totals.Total += row.Total
		d.Rows = append(d.Rows, row)
	}
	for _, st := range sites.GetSites() {
		d.Sites = append(d.Sites, newSiteView(st))
	}
	s.render(w, r, http.StatusOK, "overview", "Fleet", d)
}

// newSiteView is a site with its link state in words and its page.
func newSiteView(st *ironlinkv1.Site) siteView {
	v := siteView{Site: st, Href: "/sites/" + url.PathEscape(st.GetName())}
	switch st.GetLinkState() {
	case ironlinkv1.LinkState_LINK_STATE_CONNECTED:
		v.LinkText = "connected"
	case ironlinkv1.LinkState_LINK_STATE_DISCONNECTED:
		v.LinkText = "disconnected"
	case ironlinkv1.LinkState_LINK_STATE_UNREACHABLE:
		v.LinkText, v.Stale = "unreachable", true
	}
	return v
}

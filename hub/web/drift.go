package web

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// The drift page (/drift; docs/reference/hardware.md "Drift"): every
// (site, resource class) group's summary and its outlier groups, each
// with its devices and the selector for bulk actions, over
// HardwareService.GetFleetDrift. Filters: ?resource_class= and ?site=.

// driftOutlierNames bounds the device names the page shows per outlier
// group (the count is always shown).
const driftOutlierNames = 12

var (
	driftOnce sync.Once
	driftTmpl *template.Template
	driftErr  error
)

// driftTemplate parses the page's template once.
func driftTemplate() (*template.Template, error) {
	driftOnce.Do(func() {
		driftTmpl, driftErr = template.New("drift").Funcs(funcs).ParseFS(templateFS,
			"templates/layout.html", "templates/partials.html", "templates/drift.html")
		if driftErr != nil {
			driftErr = fmt.Errorf("web: template drift: %w", driftErr)
		}
	})
	return driftTmpl, driftErr
}

// driftOutlier is one outlier group as the page shows it.
type driftOutlier struct {
	O     *ironlinkv1.DriftOutlier
	Names []string
	More  int
	CLI   string // the CLI re-read of the group
}

// driftGroup is one group as the page shows it.
type driftGroup struct {
	G        *ironlinkv1.DriftGroup
	Outliers []driftOutlier
}

type driftData struct {
	ResourceClass, Site string
	Groups              []driftGroup
	// Error is the hub's answer when the filter names nothing it knows
	// (an unknown site): the page keeps the filter form so it can be
	// corrected, and answers 404.
	Error string
}

// drift serves /drift.
func (s *Server) drift(w http.ResponseWriter, r *http.Request, id Identity) {
	q := r.URL.Query()
	d := driftData{ResourceClass: q.Get("resource_class"), Site: q.Get("site")}
	resp, err := s.fleet.Hardware().GetFleetDrift(apiContext(r.Context(), id),
		&ironlinkv1.GetFleetDriftRequest{ResourceClass: d.ResourceClass, Site: d.Site})
	httpStatus := http.StatusOK
	switch {
	case status.Code(err) == codes.NotFound:
		d.Error, httpStatus = status.Convert(err).Message(), http.StatusNotFound
	case err != nil:
		s.apiFail(w, r, err)
		return
	}
	for _, g := range resp.GetGroups() {
		dg := driftGroup{G: g}
		for _, o := range g.GetOutliers() {
			names := o.GetDevices()
			v := driftOutlier{O: o, Names: names[:min(len(names), driftOutlierNames)], More: int(o.GetCount()) - min(len(names), driftOutlierNames),
				CLI: "ironlink hardware reread -l '" + o.GetSelectorText() + "'"}
			dg.Outliers = append(dg.Outliers, v)
		}
		d.Groups = append(d.Groups, dg)
	}
	t, err := driftTemplate()
	if err != nil {
		s.log.Error("render", "page", "drift", "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	pg := page{Title: "Drift", Who: id, Refresh: int(s.cfg.Refresh / time.Second), Path: r.URL.RequestURI(), Data: d}
	name := "layout"
	if isFragment(r) {
		name = "live"
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, pg); err != nil {
		s.log.Error("render", "page", "drift", "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(httpStatus)
	_, _ = w.Write(buf.Bytes())
}

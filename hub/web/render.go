package web

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// page is what every template gets.
type page struct {
	Title   string
	Who     Identity
	Refresh int // seconds
	Path    string
	Data    any
}

func isFragment(r *http.Request) bool { return r.Header.Get(FragmentHeader) != "" }

// render writes page p (or only its "live" region for a fragment request).
func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name, title string, data any) {
	id, _ := identityFrom(r.Context())
	pg := page{Title: title, Who: id, Refresh: int(s.cfg.Refresh / time.Second), Path: r.URL.RequestURI(), Data: data}
	tmpl := "layout"
	if isFragment(r) {
		tmpl = "live"
	}
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, tmpl, pg); err != nil {
		s.log.Error("render", "page", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// fail renders the error page with code and msg.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	s.render(w, r, code, "error", http.StatusText(code), map[string]any{"Code": code, "Message": msg})
}

// apiFail maps a FleetService error to an HTTP answer.
func (s *Server) apiFail(w http.ResponseWriter, r *http.Request, err error) {
	st, _ := status.FromError(err)
	code := http.StatusInternalServerError
	switch st.Code() {
	case codes.InvalidArgument:
		code = http.StatusBadRequest
	case codes.NotFound:
		code = http.StatusNotFound
	case codes.PermissionDenied:
		code = http.StatusForbidden
	case codes.FailedPrecondition:
		code = http.StatusConflict
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		code = http.StatusServiceUnavailable
	default:
		s.log.Error("fleet call failed", "path", r.URL.Path, "err", err)
	}
	s.fail(w, r, code, st.Message())
}

func (s *Server) dbFail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	s.log.Error("fleet view query failed", "path", r.URL.Path, "err", err)
	s.fail(w, r, http.StatusServiceUnavailable, "database unavailable; retry")
}

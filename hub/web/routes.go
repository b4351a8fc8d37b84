package web

import (
	"net/http"

	"github.com/ironlink/ironlink/hub/store"
)

// routes registers every page and action of the view on mux, each behind
// authentication (authed), and records its pattern in s.patterns (what
// TestInventoryCoversEveryRPC checks Inventory against).
func (s *Server) routes(mux *http.ServeMux) {
	handle := func(pattern string, h func(http.ResponseWriter, *http.Request, Identity)) {
		s.patterns = append(s.patterns, pattern)
		mux.Handle(pattern, s.authed(h))
	}
	handle("GET /{$}", s.overview)
	handle("GET /devices", s.devices)
	handle("GET /devices/{id}", s.device)
	handle("GET /devices/{site}/{name}", s.device)
	handle("POST /devices/bulk/preview", s.bulkPreviewPage)
	handle("POST /devices/bulk", s.bulkConfirm)
	handle("POST /devices/{id}/offer", s.offer)
	handle("POST /devices/{id}/quarantine", s.impair(store.ImpairmentQuarantined))
	handle("POST /devices/{id}/release", s.impair(store.ImpairmentReleased))
	handle("POST /devices/{id}/action", s.nodeAction)
	handle("GET /sites/{name}", s.site)
	handle("GET /operations", s.operations)
	handle("POST /operations", s.startOperation)
	handle("GET /operations/{id}", s.operation)
	handle("POST /operations/{id}/cancel", s.cancelOperation)
	handle("GET /commands", s.commands)
	handle("GET /commands/{id}", s.command)
	handle("POST /commands/{id}/retry", s.retryCommand)
	handle("GET /policy", s.policyPage)
	handle("POST /policy/pending/{verb}", s.resolvePending)
	handle("GET /policy/replay", s.replayPage)
	handle("POST /policy/replay", s.replayPage)
	handle("GET /holds", s.holds)
	handle("POST /holds", s.setHold)
	handle("POST /holds/clear", s.clearHold)
	handle("GET /handoffs", s.handoffs)
	handle("POST /handoffs/{id}/close", s.closeHandoff)
	handle("GET /validation", s.validationRuns)
	handle("GET /hardware", s.hardwareHistory)
	handle("GET /events", s.events)
	handle("GET /drift", s.drift)
	// The names an operator tries first (issue 25) lead to their page.
	for from, to := range map[string]string{"/sites": "/#sites", "/decisions": "/policy#decisions", "/pending": "/policy#pending"} {
		handle("GET "+from, func(w http.ResponseWriter, r *http.Request, _ Identity) {
			http.Redirect(w, r, to, http.StatusFound)
		})
	}
}

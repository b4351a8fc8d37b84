package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/ironlink/ironlink/internal/logkey"
	"github.com/ironlink/ironlink/internal/openstacksim"
)

// faultRequest is the JSON body of POST /faults on the control socket: an
// [openstacksim.Fault] without its Go-only fields.
type faultRequest struct {
	Service      string `json:"service"`
	Method       string `json:"method"`
	PathContains string `json:"pathContains"`
	Status       int    `json:"status"`
	Times        int    `json:"times"`
	Body         string `json:"body"`
}

// serveControl serves the simulator's control socket at path (mode 0600):
// POST /faults adds a fault (the JSON of faultRequest; answers 204),
// DELETE /faults removes every fault. The demo uses it to make one
// quarantine fail as an OpenStack service refusing the write would.
func serveControl(path string, c *openstacksim.Cloud, log *slog.Logger) (func(), error) {
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /faults", func(w http.ResponseWriter, r *http.Request) {
		var f faultRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&f); err != nil {
			http.Error(w, "fault: "+err.Error(), http.StatusBadRequest)
			return
		}
		c.InjectFault(openstacksim.Fault{Service: f.Service, Method: f.Method, PathContains: f.PathContains,
			Status: f.Status, Times: f.Times, Body: f.Body})
		log.Info("fault injected", "service", f.Service, "method", f.Method, "path", f.PathContains, "status", f.Status, "times", f.Times)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /faults", func(w http.ResponseWriter, _ *http.Request) {
		c.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("control socket", logkey.Err, err)
		}
	}()
	return func() { _ = srv.Close(); _ = os.Remove(path) }, nil
}

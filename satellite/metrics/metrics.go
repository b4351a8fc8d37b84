// Package metrics exports the satellite's Prometheus metrics on /metrics:
// polls, sweeps, resyncs, orphans, Keystone token requests, site conditions
// and every OpenStack request by service and status code. Counters that the
// agent already keeps are read from its Stats at scrape time.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ironlink/ironlink/internal/condition"
)

// Stats is what the metrics read from the agent at scrape time (a subset
// of agent.Stats, copied by the caller's func).
type Stats struct {
	// Polls and FailedPolls count completed and skipped polls.
	Polls, FailedPolls int
	// Sweeps and FailedSweeps count completed and incomplete sweeps.
	Sweeps, FailedSweeps int
	// Resyncs counts impairment resyncs; DriftCorrections the traits they corrected.
	Resyncs, DriftCorrections int
	// InstanceMismatches is the number of orphans currently reported.
	InstanceMismatches int
	// LastPollSeconds, LastSweepSeconds and LastResyncSeconds are the wall
	// times of the last poll, sweep and resync, in seconds.
	LastPollSeconds, LastSweepSeconds, LastResyncSeconds float64
}

// Satellite holds the registry and the metrics the satellite updates.
type Satellite struct {
	// Registry holds every metric below plus Go runtime and process metrics.
	Registry *prometheus.Registry

	tokenRequests *prometheus.CounterVec
	siteCondition *prometheus.GaugeVec
	requests      *prometheus.CounterVec

	mu        sync.RWMutex
	endpoints []endpoint
	stats     func() Stats
}

type endpoint struct{ prefix, service string }

// New returns the satellite's metrics; stats (may be nil until the agent
// exists, see SetStats) feeds the agent's counters.
func New() *Satellite {
	m := &Satellite{Registry: prometheus.NewRegistry()}
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.tokenRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironlink_satellite_keystone_token_requests_total",
		Help: "Keystone token requests (re-authentications) by result: ok, refused (401), failed (other errors).",
	}, []string{"result"})
	m.siteCondition = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ironlink_satellite_site_condition",
		Help: "Site conditions: 1 for the current status of each type (OpenStackAuthenticated, OrphanDetection), 0 for the others.",
	}, []string{"type", "status", "reason"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironlink_satellite_openstack_requests_total",
		Help: "HTTP requests to OpenStack services by catalog service type, method and status code (\"error\" when no response).",
	}, []string{"service", "method", "code"})
	m.Registry.MustRegister(m.tokenRequests, m.siteCondition, m.requests)
	counter := func(name, help string, f func(Stats) int) {
		m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(f(m.read())) }))
	}
	gauge := func(name, help string, f func(Stats) float64) {
		m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return f(m.read()) }))
	}
	counter("ironlink_satellite_polls_total", "Completed Ironic polls.", func(s Stats) int { return s.Polls })
	counter("ironlink_satellite_polls_failed_total", "Polls skipped because a read failed (conditions unchanged).", func(s Stats) int { return s.FailedPolls })
	counter("ironlink_satellite_sweeps_total", "Completed sweeps of assigned nodes with orphan detection.", func(s Stats) int { return s.Sweeps })
	counter("ironlink_satellite_sweeps_failed_total", "Sweeps that could not read Ironic or Nova completely.", func(s Stats) int { return s.FailedSweeps })
	counter("ironlink_satellite_resyncs_total", "Impairment resyncs.", func(s Stats) int { return s.Resyncs })
	counter("ironlink_satellite_drift_corrections_total", "Traits the resync had to correct.", func(s Stats) int { return s.DriftCorrections })
	gauge("ironlink_satellite_instance_mismatches", "Orphaned instances currently reported (seen on two consecutive sweeps).", func(s Stats) float64 { return float64(s.InstanceMismatches) })
	gauge("ironlink_satellite_last_poll_duration_seconds", "Wall time of the last completed poll, in seconds.", func(s Stats) float64 { return s.LastPollSeconds })
	gauge("ironlink_satellite_last_sweep_duration_seconds", "Wall time of the last sweep, in seconds.", func(s Stats) float64 { return s.LastSweepSeconds })
	gauge("ironlink_satellite_last_resync_duration_seconds", "Wall time of the last resync, in seconds.", func(s Stats) float64 { return s.LastResyncSeconds })
	return m
}

// SetStats sets the func the agent counters are read from.
func (m *Satellite) SetStats(f func() Stats) {
	m.mu.Lock()
	m.stats = f
	m.mu.Unlock()
}

func (m *Satellite) read() Stats {
	m.mu.RLock()
	f := m.stats
	m.mu.RUnlock()
	if f == nil {
		return Stats{}
	}
	return f()
}

// TokenRequest counts one Keystone token request with its outcome.
func (m *Satellite) TokenRequest(err error, refused bool) {
	switch {
	case err == nil:
		m.tokenRequests.WithLabelValues("ok").Inc()
	case refused:
		m.tokenRequests.WithLabelValues("refused").Inc()
	default:
		m.tokenRequests.WithLabelValues("failed").Inc()
	}
}

// SiteCondition exports c as the current state of its type.
func (m *Satellite) SiteCondition(c condition.Condition) {
	m.siteCondition.DeletePartialMatch(prometheus.Labels{"type": string(c.Type)})
	m.siteCondition.WithLabelValues(string(c.Type), string(c.Status), c.Reason).Set(1)
}

// SetEndpoints names the services behind URL prefixes (catalog service
// type → endpoint URL) so that requests are counted per service; requests
// to no known prefix count as "other".
func (m *Satellite) SetEndpoints(byService map[string]string) {
	var eps []endpoint
	for svc, u := range byService {
		if u != "" {
			eps = append(eps, endpoint{strings.TrimSuffix(u, "/"), svc})
		}
	}
	m.mu.Lock()
	m.endpoints = eps
	m.mu.Unlock()
}

func (m *Satellite) serviceOf(u string) string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	best, svc := 0, "other"
	for _, e := range m.endpoints {
		if strings.HasPrefix(u, e.prefix) && len(e.prefix) > best {
			best, svc = len(e.prefix), e.service
		}
	}
	return svc
}

// Transport wraps base (nil: http.DefaultTransport) so that every request
// is counted in ironlink_satellite_openstack_requests_total.
func (m *Satellite) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripper{m: m, base: base}
}

type roundTripper struct {
	m    *Satellite
	base http.RoundTripper
}

// RoundTrip sends r with the wrapped transport and counts it.
func (t roundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	u := *r.URL
	u.RawQuery = ""
	t.m.requests.WithLabelValues(t.m.serviceOf(u.String()), r.Method, code).Inc()
	return resp, err
}

// Serve serves /metrics on addr (host:port) until ctx ends. Errors: the
// address cannot be listened on.
func (m *Satellite) Serve(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	return m.ServeListener(ctx, ln)
}

// ServeListener serves /metrics on ln until ctx ends, then closes it.
func (m *Satellite) ServeListener(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

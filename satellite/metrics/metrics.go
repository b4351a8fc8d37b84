// Package metrics exports the satellite's Prometheus metrics on /metrics:
// polls, sweeps, resyncs (with duration histograms), orphans, Keystone token
// requests, site conditions, every OpenStack request by service and status
// code, the hub link's state and the outbox depth. Counters that the agent
// already keeps are read from its Stats at scrape time. The same listener
// answers /healthz (alive) and /readyz (see Ready).
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
}

// Satellite holds the registry and the metrics the satellite updates.
type Satellite struct {
	// Registry holds every metric below plus Go runtime and process metrics.
	Registry *prometheus.Registry

	tokenRequests  *prometheus.CounterVec
	siteCondition  *prometheus.GaugeVec
	hazards        *prometheus.CounterVec
	requests       *prometheus.CounterVec
	pollDuration   prometheus.Histogram
	sweepDuration  *prometheus.HistogramVec
	resyncDuration prometheus.Histogram
	lastPoll       prometheus.Gauge
	linkUp         prometheus.Gauge

	mu        sync.RWMutex
	endpoints []endpoint
	stats     func() Stats
	outbox    func() int
	ready     readiness
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
		Help: "Site conditions: 1 for the current status of each type (OpenStackAuthenticated, OrphanDetection, OpenStackTLSVerified, InventoryPolled, ListingConsistent, StateFileWritten), 0 for the others.",
	}, []string{"type", "status", "reason"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironlink_satellite_openstack_requests_total",
		Help: "HTTP requests to OpenStack services by catalog service type, method and status code (\"error\" when no response).",
	}, []string{"service", "method", "code"})
	m.hazards = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironlink_satellite_listing_hazards_total",
		Help: "Hazards in complete Ironic listings by kind: unsent_field (a node's answer lacked a field asked for; per node and field), duplicate_node (a node listed on two pages). A poll with any is degraded (site condition ListingConsistent=False).",
	}, []string{"kind"})
	for _, k := range HazardKinds {
		m.hazards.WithLabelValues(k)
	}
	m.Registry.MustRegister(m.tokenRequests, m.siteCondition, m.requests, m.hazards)
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
	m.pollDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ironlink_satellite_poll_duration_seconds", Buckets: durationBuckets,
		Help: "Wall time of each completed Ironic poll (listing, mapping, queueing the deltas), in seconds."})
	m.sweepDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ironlink_satellite_sweep_duration_seconds", Buckets: durationBuckets,
		Help: "Wall time of each sweep of assigned nodes with orphan detection, in seconds, by whether it read Ironic and Nova completely."}, []string{"complete"})
	m.resyncDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ironlink_satellite_resync_duration_seconds", Buckets: durationBuckets,
		Help: "Wall time of each impairment resync, in seconds."})
	m.lastPoll = prometheus.NewGauge(prometheus.GaugeOpts{Name: "ironlink_satellite_last_successful_poll_timestamp_seconds",
		Help: "When the last poll completed, in Unix seconds (0 before the first)."})
	m.linkUp = prometheus.NewGauge(prometheus.GaugeOpts{Name: "ironlink_satellite_link_up",
		Help: "1 while the link to the hub is up (the hub's welcome arrived), else 0."})
	m.Registry.MustRegister(m.pollDuration, m.sweepDuration, m.resyncDuration, m.lastPoll, m.linkUp,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ironlink_satellite_outbox_batches",
			Help: "Condition batches waiting for the hub's ack (bounded: beyond the bound they are replaced by one snapshot)."},
			func() float64 {
				m.mu.RLock()
				f := m.outbox
				m.mu.RUnlock()
				if f == nil {
					return 0
				}
				return float64(f())
			}))
	m.ready.start = time.Now()
	m.ready.linkDownSince = m.ready.start
	return m
}

// durationBuckets cover polls, sweeps and resyncs: 10 ms (a small site) to
// 10 min (a sweep of 10,000 assigned nodes over a slow Ironic).
var durationBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// SetOutbox sets the func the outbox depth is read from (link.Outbox.Pending).
func (m *Satellite) SetOutbox(f func() int) {
	m.mu.Lock()
	m.outbox = f
	m.mu.Unlock()
}

// PollDone records a completed poll (agent.Observer).
func (m *Satellite) PollDone(took time.Duration) {
	now := time.Now()
	m.pollDuration.Observe(took.Seconds())
	m.lastPoll.Set(float64(now.UnixMilli()) / 1e3)
	m.mu.Lock()
	m.ready.lastPoll = now
	m.mu.Unlock()
}

// HazardKinds are the kind label values of
// ironlink_satellite_listing_hazards_total, exported at 0 from the start
// (satellite/agent's HazardUnsentField and HazardDuplicateNode).
var HazardKinds = []string{"unsent_field", "duplicate_node"}

// ListingHazards counts n listing hazards of kind (agent.Observer).
func (m *Satellite) ListingHazards(kind string, n int) {
	m.hazards.WithLabelValues(kind).Add(float64(n))
}

// SweepDone records a sweep (agent.Observer).
func (m *Satellite) SweepDone(took time.Duration, complete bool) {
	m.sweepDuration.WithLabelValues(strconv.FormatBool(complete)).Observe(took.Seconds())
}

// ResyncDone records a resync (agent.Observer).
func (m *Satellite) ResyncDone(took time.Duration) { m.resyncDuration.Observe(took.Seconds()) }

// LinkState records the hub link going up or down (link.Config.OnLinkState).
func (m *Satellite) LinkState(up bool) {
	m.mu.Lock()
	if up {
		m.linkUp.Set(1)
		m.ready.linkUp = true
	} else {
		m.linkUp.Set(0)
		if m.ready.linkUp {
			m.ready.linkDownSince = time.Now()
		}
		m.ready.linkUp = false
	}
	m.mu.Unlock()
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

// Serve serves /metrics, /healthz and /readyz on addr (host:port) until
// ctx ends. Errors: the address cannot be listened on.
func (m *Satellite) Serve(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	return m.ServeListener(ctx, ln)
}

// ServeListener serves /metrics, /healthz and /readyz on ln until ctx ends,
// then closes it.
func (m *Satellite) ServeListener(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", m.serveReady)
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

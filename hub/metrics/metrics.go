package metrics

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ironlink/ironlink/hub/link"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/version"
)

// Latency buckets, in seconds.
var (
	// commitBuckets cover one batch transaction: 1 ms to 10 s.
	commitBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	// roundTripBuckets cover a command from the hub's send to the
	// satellite's result, which includes Ironic and Placement writes: 10 ms
	// to 5 min.
	roundTripBuckets = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	// rpcBuckets cover one RPC; Connect streams live for minutes to hours.
	rpcBuckets = []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 60, 600, 3600}
)

// maxInFlight bounds the commands whose send time is remembered for the
// round-trip histogram; beyond it the oldest half is forgotten (their
// results are then not timed).
const maxInFlight = 10000

// Hub holds the hub's registry and metrics. Safe for concurrent use.
type Hub struct {
	// Registry holds every metric of the hub plus Go runtime and process
	// metrics; Handler serves it.
	Registry *prometheus.Registry
	// GRPC is the per-RPC server metrics (grpc_server_*); its interceptors
	// go into the hub's interceptor chain and InitializeMetrics is called
	// once the services are registered.
	GRPC *grpcprom.ServerMetrics

	replica        string
	linksOpened    prometheus.Counter
	takeovers      prometheus.Counter
	linksEnded     *prometheus.CounterVec
	batches        *prometheus.CounterVec
	deltas         prometheus.Counter
	commit         prometheus.Histogram
	commandsSent   *prometheus.CounterVec
	commandResults *prometheus.CounterVec
	roundTrip      *prometheus.HistogramVec
	dbErrors       *prometheus.CounterVec
	replay         *prometheus.CounterVec
	rosterReloads  prometheus.Counter
	healthClamped  prometheus.Counter
	ready          prometheus.Gauge
	labelsCapped   prometheus.Gauge

	mu       sync.Mutex
	inFlight map[string]time.Time // command id → first send on this replica
	now      func() time.Time
}

// New returns the metrics of the replica named replica (the label of the
// per-replica series).
func New(replica string) *Hub {
	m := &Hub{Registry: prometheus.NewRegistry(), replica: replica, inFlight: map[string]time.Time{}, now: time.Now}
	m.GRPC = grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(rpcBuckets)))
	rl := prometheus.Labels{"replica": replica}
	m.linksOpened = prometheus.NewCounter(prometheus.CounterOpts{Name: "ironlink_hub_links_opened_total", ConstLabels: rl,
		Help: "Satellite links opened on this replica (hello accepted and recorded)."})
	m.takeovers = prometheus.NewCounter(prometheus.CounterOpts{Name: "ironlink_hub_link_takeovers_total", ConstLabels: rl,
		Help: "Links opened on this replica that replaced another satellite process's link open less than a minute (two satellites running for one site?); the hub log names the site."})
	m.linksEnded = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ironlink_hub_links_ended_total", ConstLabels: rl,
		Help: "Satellite links ended on this replica, by reason: closed, superseded, fenced, drained, revoked, refused, unavailable, error."}, []string{"reason"})
	m.batches = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ironlink_hub_batches_committed_total", ConstLabels: rl,
		Help: "Condition batches committed (acked) by this replica, by kind (delta, snapshot) and whether they were duplicates acked without effect."}, []string{"kind", "duplicate"})
	m.deltas = prometheus.NewCounter(prometheus.CounterOpts{Name: "ironlink_hub_device_updates_committed_total", ConstLabels: rl,
		Help: "Device updates (deltas and snapshot entries) in the non-duplicate batches this replica committed."})
	m.commit = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ironlink_hub_batch_commit_duration_seconds", ConstLabels: rl, Buckets: commitBuckets,
		Help: "Time to commit one condition batch in PostgreSQL, in seconds."})
	m.commandsSent = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ironlink_hub_commands_sent_total", ConstLabels: rl,
		Help: "Quarantine/release commands sent down a link by this replica, by whether it was a redelivery."}, []string{"redelivery"})
	m.commandResults = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ironlink_hub_command_results_total", ConstLabels: rl,
		Help: "Command results recorded by this replica: succeeded, failed, or ignored (for a superseded generation)."}, []string{"result"})
	m.roundTrip = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ironlink_hub_command_round_trip_seconds", ConstLabels: rl, Buckets: roundTripBuckets,
		Help: "From a command's first send by this replica to its result on this replica, in seconds, by result (succeeded, failed)."}, []string{"result"})
	m.dbErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ironlink_hub_database_errors_total", ConstLabels: rl,
		Help: "Failed PostgreSQL queries and connection attempts, by kind: connection, timeout, serialization, constraint, other."}, []string{"kind"})
	m.replay = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ironlink_hub_replay_cache_checks_total", ConstLabels: rl,
		Help: "Client-assertion jti checks against the replay cache, by result: fresh, replayed (token refused), error (cache unreachable, token refused)."}, []string{"result"})
	m.rosterReloads = prometheus.NewCounter(prometheus.CounterOpts{Name: "ironlink_hub_roster_reloads_total", ConstLabels: rl,
		Help: "Roster reloads that took effect (SIGHUP or file change)."})
	m.healthClamped = prometheus.NewCounter(prometheus.CounterOpts{Name: "ironlink_hub_health_events_clamped_total", ConstLabels: rl,
		Help: "Health events (either door) whose generated time was after the hub's clock and was clamped to it."})
	m.ready = prometheus.NewGauge(prometheus.GaugeOpts{Name: "ironlink_hub_ready", ConstLabels: rl,
		Help: "1 while this replica is ready (database reachable, schema current, not draining), else 0."})
	m.labelsCapped = prometheus.NewGauge(prometheus.GaugeOpts{Name: "ironlink_hub_devices_labels_capped", ConstLabels: rl,
		Help: "Devices whose labels, the satellite's and the labels file's merged, exceed the 32-label limit, so that some were dropped (the file's kept first, then the satellite's in key order); as this replica last counted them, after each labels-file write and every minute (0 without --labels-file)."})
	build := prometheus.NewGauge(prometheus.GaugeOpts{Name: "ironlink_hub_build_info", ConstLabels: prometheus.Labels{"replica": replica, "version": version.Version},
		Help: "Always 1; the version label is the hub's build version."})
	build.Set(1)
	for _, v := range []string{"closed", "superseded", "fenced", "drained", "revoked", "refused", "unavailable", "error"} {
		m.linksEnded.WithLabelValues(v)
	}
	for _, v := range []string{"succeeded", "failed", "ignored"} {
		m.commandResults.WithLabelValues(v)
	}
	for _, v := range []string{"connection", "timeout", "serialization", "constraint", "other"} {
		m.dbErrors.WithLabelValues(v)
	}
	for _, v := range []string{"fresh", "replayed", "error"} {
		m.replay.WithLabelValues(v)
	}
	// go_gc_heap_live_bytes besides the memstats: the heap the last
	// collection found live, the floor a leak raises (the memstats' heap
	// figures also hold what was allocated since, garbage included).
	goc := collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{Matcher: liveHeapMetric}))
	m.Registry.MustRegister(goc, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.GRPC, m.linksOpened, m.takeovers, m.linksEnded, m.batches, m.deltas, m.commit, m.commandsSent, m.commandResults,
		m.roundTrip, m.dbErrors, m.replay, m.rosterReloads, m.healthClamped, m.ready, m.labelsCapped, build)
	return m
}

// liveHeapMetric selects runtime/metrics' /gc/heap/live:bytes, exported as
// go_gc_heap_live_bytes.
var liveHeapMetric = regexp.MustCompile(`^/gc/heap/live:bytes$`)

// Handler serves the registry in the Prometheus text or OpenMetrics format.
func (m *Hub) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// LinkHooks returns the link server's hooks feeding these metrics.
func (m *Hub) LinkHooks() link.Hooks {
	return link.Hooks{
		LinkOpened:   func(string) { m.linksOpened.Inc() },
		LinkTakeover: func(string) { m.takeovers.Inc() },
		LinkEnded:    func(_, reason string) { m.linksEnded.WithLabelValues(reason).Inc() },
		BatchCommitted: func(_ string, devices int, snapshot, duplicate bool, took time.Duration) {
			kind := "delta"
			if snapshot {
				kind = "snapshot"
			}
			dup := "false"
			if duplicate {
				dup = "true"
			} else {
				m.deltas.Add(float64(devices))
			}
			m.batches.WithLabelValues(kind, dup).Inc()
			m.commit.Observe(took.Seconds())
		},
		CommandSent:   m.commandSent,
		CommandResult: m.commandResult,
	}
}

func (m *Hub) commandSent(_, id string, redelivery bool) {
	red := "false"
	if redelivery {
		red = "true"
	}
	m.commandsSent.WithLabelValues(red).Inc()
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.inFlight[id]; ok {
		return // timed from its first send
	}
	if len(m.inFlight) >= maxInFlight {
		m.forgetOldestLocked()
	}
	m.inFlight[id] = m.now()
}

// forgetOldestLocked drops the older half of the remembered send times.
func (m *Hub) forgetOldestLocked() {
	times := make([]time.Time, 0, len(m.inFlight))
	for _, t := range m.inFlight {
		times = append(times, t)
	}
	// A sort of 10,000 times happens at most once per 5,000 sends.
	slices.SortFunc(times, time.Time.Compare)
	cut := times[len(times)/2]
	for id, t := range m.inFlight {
		if t.Before(cut) {
			delete(m.inFlight, id)
		}
	}
}

func (m *Hub) commandResult(_, id string, success, ignored bool) {
	result := "failed"
	switch {
	case ignored:
		result = "ignored"
	case success:
		result = "succeeded"
	}
	m.commandResults.WithLabelValues(result).Inc()
	m.mu.Lock()
	sent, ok := m.inFlight[id]
	delete(m.inFlight, id)
	m.mu.Unlock()
	if ok && !ignored {
		m.roundTrip.WithLabelValues(result).Observe(m.now().Sub(sent).Seconds())
	}
}

// SetReady records this replica's readiness (health.Options.OnChange).
func (m *Hub) SetReady(ready bool) {
	if ready {
		m.ready.Set(1)
	} else {
		m.ready.Set(0)
	}
}

// SetDevicesLabelsCapped sets ironlink_hub_devices_labels_capped: n
// devices carry more merged labels than the limit (hub/labelsfile counts
// them).
func (m *Hub) SetDevicesLabelsCapped(n int) { m.labelsCapped.Set(float64(n)) }

// HealthClamped counts n health events whose generated time was in the
// future and was clamped to the hub's clock (healthapi.Config.OnClamped).
func (m *Hub) HealthClamped(n int) { m.healthClamped.Add(float64(n)) }

// RosterReloaded counts one roster reload that took effect.
func (m *Hub) RosterReloaded() { m.rosterReloads.Inc() }

// WatchRoster exports ironlink_hub_roster_reload_failing: 1 while
// lastError (auth.RosterWatcher.LastError) says the newest roster file was
// refused and the previous roster is still in force.
func (m *Hub) WatchRoster(lastError func() error) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ironlink_hub_roster_reload_failing",
		ConstLabels: prometheus.Labels{"replica": m.replica},
		Help:        "1 while the newest roster file is refused (invalid) and the previous roster stays in force, else 0."},
		func() float64 {
			if lastError() != nil {
				return 1
			}
			return 0
		}))
}

// WatchLinks exports ironlink_hub_links_open: the links open on this
// replica now, as open reports (link.Server.Links).
func (m *Hub) WatchLinks(open func() int) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ironlink_hub_links_open",
		ConstLabels: prometheus.Labels{"replica": m.replica},
		Help:        "Satellite links open on this replica now."},
		func() float64 { return float64(open()) }))
}

// Replay wraps a replay cache so that every check is counted in
// ironlink_hub_replay_cache_checks_total; answers pass through unchanged.
func (m *Hub) Replay(c auth.ReplayCache) auth.ReplayCache { return replayCounter{m: m, next: c} }

type replayCounter struct {
	m    *Hub
	next auth.ReplayCache
}

// Remember implements auth.ReplayCache.
func (r replayCounter) Remember(ctx context.Context, clientID, jti string, ttl time.Duration) (bool, error) {
	replayed, err := r.next.Remember(ctx, clientID, jti, ttl)
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		r.m.replay.WithLabelValues("error").Inc()
	case err != nil:
	case replayed:
		r.m.replay.WithLabelValues("replayed").Inc()
	default:
		r.m.replay.WithLabelValues("fresh").Inc()
	}
	return replayed, err
}

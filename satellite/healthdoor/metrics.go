package healthdoor

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of door events, the values of the outcome label of
// ironlink_satellite_health_events_total.
const (
	// OutcomeAccepted: the door took the event (valid) to forward it.
	OutcomeAccepted = "accepted"
	// OutcomeRefused: the door or the hub refused the event's batch.
	OutcomeRefused = "refused"
	// OutcomeSpooled: the event arrived while the link was down and waited
	// in the spool for it.
	OutcomeSpooled = "spooled"
	// OutcomeDropped: the full spool dropped the event before the hub took it.
	OutcomeDropped = "dropped"
	// OutcomeCommitted: the hub committed the event's batch.
	OutcomeCommitted = "committed"
)

// Metrics are the door's counters (docs/reference/metrics.md).
type Metrics struct {
	events *prometheus.CounterVec
	depth  prometheus.Gauge
}

// NewMetrics registers the door's metrics on reg:
// ironlink_satellite_health_events_total{outcome} and
// ironlink_satellite_health_spool_events.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ironlink_satellite_health_events_total",
			Help: "Health events of the local door by outcome: accepted, refused, spooled (arrived while the link was down), dropped (spool full), committed."},
			[]string{"outcome"}),
		depth: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ironlink_satellite_health_spool_events",
			Help: "Health events waiting in the local door's spool for the hub's answer."}),
	}
	for _, o := range []string{OutcomeAccepted, OutcomeRefused, OutcomeSpooled, OutcomeDropped, OutcomeCommitted} {
		m.events.WithLabelValues(o)
	}
	reg.MustRegister(m.events, m.depth)
	return m
}

func (m *Metrics) add(outcome string, n int) {
	if m != nil {
		m.events.WithLabelValues(outcome).Add(float64(n))
	}
}

func (m *Metrics) setDepth(n int) {
	if m != nil {
		m.depth.Set(float64(n))
	}
}

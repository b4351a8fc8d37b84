package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ironlink/ironlink/hub/policyrun"
)

// decisionBuckets cover the policy's decision latency (the triggering status
// change committed → the decision and its command committed): 10 ms to 10 min
// (hold-downs make it long on purpose).
var decisionBuckets = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// PolicySiteState is one site's policy state for the scrape-time gauges.
type PolicySiteState struct {
	Site                                       string
	Tripped                                    bool
	PendingHeld, PendingStale, PendingAwaiting int
	// CommonCause are the label values the faults behind a tripped guard
	// share (label, value, faults carrying it); nil while armed.
	CommonCause []LabelShare
}

// LabelShare is one label value shared by the faults behind a tripped
// guard, and how many carry it.
type LabelShare struct {
	Label, Value string
	Faults       int
}

// WatchPolicy registers the scrape-time gauges of the quarantine policy,
// read through states at every scrape (bounded by 5 s; a failed read is
// logged and yields no samples):
//
//	ironlink_policy_guard_tripped{site}            1 while the site's guard is tripped, else 0
//	ironlink_policy_pending_actions{site,reason}   pending actions, by reason (HeldByGuard, StaleTrigger)
//	ironlink_policy_guard_common_cause{site,label,value}  while tripped: faults behind it carrying that label value
//
// and returns the evaluator's hooks feeding
//
//	ironlink_policy_decisions_total{replica,action,dry_run}
//	ironlink_policy_decision_latency_seconds{replica}  (automatic quarantines, live)
//	ironlink_policy_evaluator_leading{replica}         1 while this replica evaluates
func (m *Hub) WatchPolicy(states func(context.Context) ([]PolicySiteState, error), log *slog.Logger) policyrun.Hooks {
	rl := prometheus.Labels{"replica": m.replica}
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ironlink_policy_decisions_total", ConstLabels: rl,
		Help: "Quarantine-policy decisions recorded by this replica, by action (QUARANTINE, PENDING, SKIP, RELEASE) and dry_run."}, []string{"action", "dry_run"})
	latency := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ironlink_policy_decision_latency_seconds", ConstLabels: rl, Buckets: decisionBuckets,
		Help: "From a triggering status change's commit to the automatic quarantine's command, in seconds (live decisions)."})
	leading := prometheus.NewGauge(prometheus.GaugeOpts{Name: "ironlink_policy_evaluator_leading", ConstLabels: rl,
		Help: "1 while this replica holds the policy evaluator's advisory lock, else 0."})
	m.Registry.MustRegister(decisions, latency, leading, &policyCollector{states: states, log: log})
	return policyrun.Hooks{
		Decided: func(action string, dryRun bool, lat time.Duration) {
			dr := "false"
			if dryRun {
				dr = "true"
			}
			decisions.WithLabelValues(action, dr).Inc()
			if action == "QUARANTINE" && !dryRun && lat > 0 {
				latency.Observe(lat.Seconds())
			}
		},
		Leading: func(on bool) {
			if on {
				leading.Set(1)
			} else {
				leading.Set(0)
			}
		},
	}
}

var (
	guardTrippedDesc = prometheus.NewDesc("ironlink_policy_guard_tripped",
		"1 while the site's blast-radius guard is tripped (automatic quarantines wait for an operator), else 0.", []string{"site"}, nil)
	pendingDesc = prometheus.NewDesc("ironlink_policy_pending_actions",
		"Automatic quarantines waiting, by site and reason: for an operator (HeldByGuard, StaleTrigger) or for fresh evidence from the site (AwaitingFreshEvidence).", []string{"site", "reason"}, nil)
)

var causeDesc = prometheus.NewDesc("ironlink_policy_guard_common_cause",
	"While the site's guard is tripped: how many of the faults behind it (live automatic quarantines and holds since one guard window before the trip) carry this label value; only values at least half of them and at least two carry (docs/reference/labels.md).",
	[]string{"site", "label", "value"}, nil)

type policyCollector struct {
	states func(context.Context) ([]PolicySiteState, error)
	log    *slog.Logger
}

func (c *policyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- guardTrippedDesc
	ch <- pendingDesc
	ch <- causeDesc
}

func (c *policyCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	states, err := c.states(ctx)
	if err != nil {
		c.log.Warn("policy metrics: reading site states", "err", err)
		return
	}
	for _, s := range states {
		v := 0.0
		if s.Tripped {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(guardTrippedDesc, prometheus.GaugeValue, v, s.Site)
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(s.PendingHeld), s.Site, "HeldByGuard")
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(s.PendingStale), s.Site, "StaleTrigger")
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(s.PendingAwaiting), s.Site, "AwaitingFreshEvidence")
		for _, sh := range s.CommonCause {
			ch <- prometheus.MustNewConstMetric(causeDesc, prometheus.GaugeValue, float64(sh.Faults), s.Site, sh.Label, sh.Value)
		}
	}
}

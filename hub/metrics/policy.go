package metrics

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
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
	// TrippedDomains are the site's tripped per-label guards (label,
	// value, pending actions each holds); nil while all are armed.
	TrippedDomains []TrippedDomain
}

// TrippedDomain is one tripped per-label guard of a site: the label value
// (failure domain) whose automatic quarantines it holds, and how many
// pending actions it holds.
type TrippedDomain struct {
	Label, Value string
	Held         int
}

// PolicyStates turns PolicyService's site states (hub/policyapi's
// SiteStates) into the gauges' input: the guard, pending counts, common
// cause and tripped per-label guards of each site.
func PolicyStates(states []*ironlinkv1.SitePolicyState) []PolicySiteState {
	out := make([]PolicySiteState, len(states))
	for i, s := range states {
		out[i] = PolicySiteState{Site: s.GetSite(), Tripped: s.GetGuardTripped(),
			PendingHeld: int(s.GetPendingHeldCount()), PendingStale: int(s.GetPendingStaleCount()),
			PendingAwaiting: int(s.GetPendingAwaitingCount())}
		for _, sh := range s.GetCommonCause().GetShares() {
			out[i].CommonCause = append(out[i].CommonCause, LabelShare{Label: sh.GetLabel(), Value: sh.GetValue(), Faults: int(sh.GetCount())})
		}
		for _, d := range s.GetTrippedDomains() {
			out[i].TrippedDomains = append(out[i].TrippedDomains, TrippedDomain{Label: d.GetLabel(), Value: d.GetValue(), Held: int(d.GetPendingHeldCount())})
		}
	}
	return out
}

// MaxDomainSeries bounds the ironlink_policy_label_guard_tripped series of
// one site: the tripped per-label guards holding the most pending actions
// (then by label and value); ironlink_policy_label_guards_tripped counts
// them all (docs/reference/metrics.md).
const MaxDomainSeries = 20

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
//	ironlink_policy_label_guard_tripped{site,label,value} 1 while that per-label guard is tripped (≤ MaxDomainSeries per site)
//	ironlink_policy_label_guards_tripped{site}            tripped per-label guards of the site
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

var (
	domainTrippedDesc = prometheus.NewDesc("ironlink_policy_label_guard_tripped",
		"1 while the site's per-label guard for this label value (failure domain, e.g. rack=r12) is tripped: the automatic quarantines of its devices wait for an operator; absent while armed. At most 20 series per site, those holding the most pending actions (docs/reference/metrics.md).",
		[]string{"site", "label", "value"}, nil)
	domainsTrippedDesc = prometheus.NewDesc("ironlink_policy_label_guards_tripped",
		"How many of the site's per-label guards (label values) are tripped.", []string{"site"}, nil)
)

type policyCollector struct {
	states func(context.Context) ([]PolicySiteState, error)
	log    *slog.Logger
}

func (c *policyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- guardTrippedDesc
	ch <- pendingDesc
	ch <- causeDesc
	ch <- domainTrippedDesc
	ch <- domainsTrippedDesc
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
		collectDomains(ch, s)
	}
}

// collectDomains sends a site's per-label guard series: the count, and one
// series per tripped label value, at most MaxDomainSeries.
func collectDomains(ch chan<- prometheus.Metric, s PolicySiteState) {
	ch <- prometheus.MustNewConstMetric(domainsTrippedDesc, prometheus.GaugeValue, float64(len(s.TrippedDomains)), s.Site)
	ds := slices.Clone(s.TrippedDomains)
	slices.SortFunc(ds, func(a, b TrippedDomain) int {
		return cmp.Or(cmp.Compare(b.Held, a.Held), cmp.Compare(a.Label, b.Label), cmp.Compare(a.Value, b.Value))
	})
	for _, d := range ds[:min(len(ds), MaxDomainSeries)] {
		ch <- prometheus.MustNewConstMetric(domainTrippedDesc, prometheus.GaugeValue, 1, s.Site, d.Label, d.Value)
	}
}

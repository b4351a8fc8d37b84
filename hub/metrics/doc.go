// Package metrics owns the hub's Prometheus metrics: per-RPC counters and
// latency histograms (go-grpc-middleware's providers/prometheus, in the one
// interceptor chain of hub/app), link, batch and command events (through
// link.Hooks), database errors (a pgx tracer), replay-cache answers (a
// wrapper of auth.ReplayCache), roster reloads, readiness, and a collector
// that reads sites and open commands from PostgreSQL at scrape time, with a
// timeout.
//
// Nothing here is global: New returns a Hub whose Registry the admin
// listener serves (hub/health). Every metric, its labels and the alerts built
// on them are listed in docs/reference/metrics.md; a test scrapes a
// real hub after driving a link and checks the series a user alerts on.
//
// It imports hub/link and hub/store for their hook and row types; neither
// imports it.
package metrics

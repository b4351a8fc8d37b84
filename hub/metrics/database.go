package metrics

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ironlink/ironlink/hub/store"
)

// Tracer returns a pgx tracer (store.WithTracer) that counts failed queries
// and failed connection acquisitions in ironlink_hub_database_errors_total.
// A query cancelled by its caller is not a database error and is not
// counted; one that ran out of time is ("timeout").
func (m *Hub) Tracer() pgx.QueryTracer { return dbTracer{m} }

type dbTracer struct{ m *Hub }

var (
	_ pgx.QueryTracer       = dbTracer{}
	_ pgxpool.AcquireTracer = dbTracer{}
)

// TraceQueryStart implements pgx.QueryTracer.
func (dbTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t dbTracer) TraceQueryEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	t.count(d.Err)
}

// TraceAcquireStart implements pgxpool.AcquireTracer.
func (dbTracer) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	return ctx
}

// TraceAcquireEnd implements pgxpool.AcquireTracer.
func (t dbTracer) TraceAcquireEnd(_ context.Context, _ *pgxpool.Pool, d pgxpool.TraceAcquireEndData) {
	t.count(d.Err)
}

func (t dbTracer) count(err error) {
	if kind := errorKind(err); kind != "" {
		t.m.dbErrors.WithLabelValues(kind).Inc()
	}
}

// errorKind classifies a pgx error: "" for none (or a caller's
// cancellation, or no rows), else connection, timeout, serialization,
// constraint or other.
func errorKind(err error) string {
	var pgErr *pgconn.PgError
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, pgx.ErrNoRows):
		return ""
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &pgErr):
		switch {
		case pgErr.Code == "40001" || pgErr.Code == "40P01":
			return "serialization"
		case len(pgErr.Code) == 5 && pgErr.Code[:2] == "23":
			return "constraint"
		case len(pgErr.Code) == 5 && (pgErr.Code[:2] == "08" || pgErr.Code[:2] == "57"):
			return "connection" // connection exception, operator intervention (shutdown)
		}
		return "other"
	}
	return "connection" // no server answer: refused, reset, closed pool
}

// Database is what the scrape-time collector reads (*store.Store).
type Database interface {
	SiteLinks(ctx context.Context) ([]store.SiteLink, error)
	OpenCommandStats(ctx context.Context) ([]store.OpenCommands, error)
}

// WatchDatabase registers a collector that reads db at every scrape (within
// timeout, default 5 s): per site whether it is linked and to which
// replica, whether it is stale and when it was last seen; open commands per
// state with the age of the oldest. When PostgreSQL does not answer, those
// series are left out of the scrape and ironlink_hub_database_scrape_ok is 0.
// Every replica reports the same database-wide values: aggregate with max.
func (m *Hub) WatchDatabase(db Database, timeout time.Duration, log *slog.Logger) {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	m.Registry.MustRegister(&dbCollector{db: db, timeout: timeout, log: log, now: time.Now})
}

var (
	descSiteLinked = prometheus.NewDesc("ironlink_hub_site_linked",
		"1 when the site's link is open on the replica named by link_replica, 0 when the site has no link (database-wide).",
		[]string{"site", "link_replica"}, nil)
	descSiteStale = prometheus.NewDesc("ironlink_hub_site_stale",
		"1 when the site has been silent for longer than stale_after (its devices are UNREACHABLE), else 0 (database-wide).",
		[]string{"site"}, nil)
	descSiteLastSeen = prometheus.NewDesc("ironlink_hub_site_last_seen_timestamp_seconds",
		"When anything last arrived from the site, in Unix seconds; absent for a site never seen (database-wide).",
		[]string{"site"}, nil)
	descLinksByReplica = prometheus.NewDesc("ironlink_hub_replica_links",
		"Sites whose link each replica holds, as recorded in PostgreSQL (database-wide; \"\" counts sites without a link).",
		[]string{"link_replica"}, nil)
	descCommands = prometheus.NewDesc("ironlink_hub_commands_open",
		"Unfinished quarantine/release commands by state: PENDING (not sent yet), SENT (awaiting a result), FAILED (waiting for a retry) (database-wide).",
		[]string{"state"}, nil)
	descCommandAge = prometheus.NewDesc("ironlink_hub_command_oldest_age_seconds",
		"Age of the oldest unfinished command in each state since the operator asked, in seconds; 0 when there is none (database-wide).",
		[]string{"state"}, nil)
	descScrapeOK = prometheus.NewDesc("ironlink_hub_database_scrape_ok",
		"1 when the scrape-time database queries answered within their timeout, else 0.",
		nil, nil)
)

type dbCollector struct {
	db      Database
	timeout time.Duration
	log     *slog.Logger
	now     func() time.Time
}

// Describe implements prometheus.Collector.
func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSiteLinked, descSiteStale, descSiteLastSeen, descLinksByReplica, descCommands, descCommandAge, descScrapeOK} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	ok := 1.0
	sites, err := c.db.SiteLinks(ctx)
	if err != nil {
		ok = 0
		c.log.Warn("metrics: cannot read sites", "err", err)
	}
	byReplica := map[string]int{}
	for _, s := range sites {
		linked := 0.0
		if s.Replica != "" {
			linked = 1
		}
		byReplica[s.Replica]++
		ch <- prometheus.MustNewConstMetric(descSiteLinked, prometheus.GaugeValue, linked, s.Site, s.Replica)
		ch <- prometheus.MustNewConstMetric(descSiteStale, prometheus.GaugeValue, b2f(s.Stale), s.Site)
		if !s.LastSeen.IsZero() {
			ch <- prometheus.MustNewConstMetric(descSiteLastSeen, prometheus.GaugeValue, float64(s.LastSeen.UnixMilli())/1e3, s.Site)
		}
	}
	for r, n := range byReplica {
		ch <- prometheus.MustNewConstMetric(descLinksByReplica, prometheus.GaugeValue, float64(n), r)
	}
	if err == nil {
		open, err := c.db.OpenCommandStats(ctx)
		if err != nil {
			ok = 0
			c.log.Warn("metrics: cannot count open commands", "err", err)
		} else {
			seen := map[store.CommandState]store.OpenCommands{}
			for _, o := range open {
				seen[o.State] = o
			}
			now := c.now()
			for _, st := range []store.CommandState{store.CommandPending, store.CommandSent, store.CommandFailed} {
				o, has := seen[st]
				age := 0.0
				if has {
					age = max(0, now.Sub(o.OldestCreated).Seconds())
				}
				ch <- prometheus.MustNewConstMetric(descCommands, prometheus.GaugeValue, float64(o.Count), string(st))
				ch <- prometheus.MustNewConstMetric(descCommandAge, prometheus.GaugeValue, age, string(st))
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(descScrapeOK, prometheus.GaugeValue, ok)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

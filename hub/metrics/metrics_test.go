package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ironlink/ironlink/hub/metrics"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/promtest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// series is one expected sample: a metric name, label pairs and a value.
type series struct {
	name   string
	labels []string
	want   float64
}

// scrape serves m's registry over HTTP and reads it as Prometheus would.
func scrape(t *testing.T, m *metrics.Hub) promtest.Page {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	return promtest.Scrape(t, srv.URL)
}

// check fails t for every expected sample that is missing or differs.
func check(t *testing.T, p promtest.Page, want ...series) {
	t.Helper()
	for _, w := range want {
		got, ok := p.Value(w.name, w.labels...)
		switch {
		case !ok:
			t.Errorf("no %s%v; the page has %v", w.name, w.labels, p.Series(w.name))
		case got != w.want:
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.want)
		}
	}
}

// absent fails t for every series of name with the label pairs that is on the page.
func absent(t *testing.T, p promtest.Page, name string, labels ...string) {
	t.Helper()
	if v, ok := p.Value(name, labels...); ok {
		t.Errorf("%s%v is on the page (%v), want it absent", name, labels, v)
	}
}

// A fresh hub exports every labelled series it documents at 0 (so that a
// rate() or an alert on them has a series from the start), readiness 0 and
// its build.
func TestFreshHubExportsEverySeriesAtZero(t *testing.T) {
	p := scrape(t, metrics.New("r1"))
	var want []series
	for label, values := range map[string][]string{
		"ironlink_hub_links_ended_total|reason":         {"closed", "superseded", "fenced", "drained", "revoked", "refused", "unavailable", "error"},
		"ironlink_hub_command_results_total|result":     {"succeeded", "failed", "ignored"},
		"ironlink_hub_database_errors_total|kind":       {"connection", "timeout", "serialization", "constraint", "other"},
		"ironlink_hub_replay_cache_checks_total|result": {"fresh", "replayed", "error"},
	} {
		name, key, _ := strings.Cut(label, "|")
		for _, v := range values {
			want = append(want, series{name, []string{"replica", "r1", key, v}, 0})
		}
	}
	want = append(want,
		series{"ironlink_hub_links_opened_total", []string{"replica", "r1"}, 0},
		series{"ironlink_hub_ready", []string{"replica", "r1"}, 0},
		series{"ironlink_hub_build_info", []string{"replica", "r1"}, 1})
	check(t, p, want...)
}

// The link server's hooks count what happened on the link, labelled by
// replica and kind; duplicates are acked without adding device updates; a
// round trip is timed from a command's first send to its (not ignored)
// result.
func TestLinkHooksCountLinkEvents(t *testing.T) {
	m := metrics.New("r1")
	h := m.LinkHooks()
	h.LinkOpened("a")
	h.LinkOpened("b")
	h.LinkTakeover("a")
	h.LinkEnded("a", "fenced")
	h.LinkEnded("b", "closed")
	h.LinkEnded("b", "closed")
	h.BatchCommitted("a", 3, false, false, 2*time.Millisecond)
	h.BatchCommitted("a", 40, true, false, 20*time.Millisecond)
	h.BatchCommitted("a", 3, false, true, time.Millisecond) // a duplicate
	h.CommandSent("a", "c1", false)
	h.CommandSent("a", "c1", true)
	h.CommandSent("a", "c2", false)
	h.CommandSent("a", "c3", false)
	h.CommandResult("a", "c1", true, false)
	h.CommandResult("a", "c2", false, false)
	h.CommandResult("a", "c3", false, true) // superseded: not timed
	h.CommandResult("a", "c4", true, false) // sent by another replica: counted, not timed
	m.SetReady(true)
	m.RosterReloaded()
	r := []string{"replica", "r1"}
	with := func(kv ...string) []string { return append(append([]string{}, r...), kv...) }
	check(t, scrape(t, m),
		series{"ironlink_hub_links_opened_total", r, 2},
		series{"ironlink_hub_link_takeovers_total", r, 1},
		series{"ironlink_hub_links_ended_total", with("reason", "fenced"), 1},
		series{"ironlink_hub_links_ended_total", with("reason", "closed"), 2},
		series{"ironlink_hub_links_ended_total", with("reason", "error"), 0},
		series{"ironlink_hub_batches_committed_total", with("kind", "delta", "duplicate", "false"), 1},
		series{"ironlink_hub_batches_committed_total", with("kind", "snapshot", "duplicate", "false"), 1},
		series{"ironlink_hub_batches_committed_total", with("kind", "delta", "duplicate", "true"), 1},
		series{"ironlink_hub_device_updates_committed_total", r, 43},
		series{"ironlink_hub_batch_commit_duration_seconds", r, 3}, // histogram: samples
		series{"ironlink_hub_commands_sent_total", with("redelivery", "false"), 3},
		series{"ironlink_hub_commands_sent_total", with("redelivery", "true"), 1},
		series{"ironlink_hub_command_results_total", with("result", "succeeded"), 2},
		series{"ironlink_hub_command_results_total", with("result", "failed"), 1},
		series{"ironlink_hub_command_results_total", with("result", "ignored"), 1},
		series{"ironlink_hub_command_round_trip_seconds", with("result", "succeeded"), 1},
		series{"ironlink_hub_command_round_trip_seconds", with("result", "failed"), 1},
		series{"ironlink_hub_ready", r, 1},
		series{"ironlink_hub_roster_reloads_total", r, 1})
	m.SetReady(false)
	check(t, scrape(t, m), series{"ironlink_hub_ready", r, 0})
}

// The pgx tracer counts failed queries and acquisitions by kind; a caller's
// cancellation and "no rows" are not database errors.
func TestDatabaseErrorsByKind(t *testing.T) {
	m := metrics.New("r1")
	tr := m.Tracer()
	acq := tr.(pgxpool.AcquireTracer)
	ctx := context.Background()
	for _, err := range []error{
		nil, context.Canceled, pgx.ErrNoRows, fmt.Errorf("wrapped: %w", context.Canceled),
		context.DeadlineExceeded,
		&pgconn.PgError{Code: "40001"}, &pgconn.PgError{Code: "40P01"},
		&pgconn.PgError{Code: "23505"},
		&pgconn.PgError{Code: "08006"}, &pgconn.PgError{Code: "57P01"}, errors.New("dial tcp: connection refused"),
		&pgconn.PgError{Code: "42P01"},
	} {
		tr.TraceQueryEnd(ctx, nil, pgx.TraceQueryEndData{Err: err})
	}
	acq.TraceAcquireEnd(ctx, nil, pgxpool.TraceAcquireEndData{Err: errors.New("closed pool")})
	with := func(kind string) []string { return []string{"replica", "r1", "kind", kind} }
	check(t, scrape(t, m),
		series{"ironlink_hub_database_errors_total", with("timeout"), 1},
		series{"ironlink_hub_database_errors_total", with("serialization"), 2},
		series{"ironlink_hub_database_errors_total", with("constraint"), 1},
		series{"ironlink_hub_database_errors_total", with("connection"), 4},
		series{"ironlink_hub_database_errors_total", with("other"), 1})
}

type replayAnswer struct {
	replayed bool
	err      error
}

type fakeReplay struct{ answers []replayAnswer }

func (f *fakeReplay) Remember(context.Context, string, string, time.Duration) (bool, error) {
	a := f.answers[0]
	f.answers = f.answers[1:]
	return a.replayed, a.err
}

// Every replay-cache check is counted by result and its answer passes
// through unchanged; a cancelled check is not counted.
func TestReplayChecksByResult(t *testing.T) {
	m := metrics.New("r1")
	answers := []replayAnswer{{false, nil}, {false, nil}, {true, nil}, {false, errors.New("down")}, {false, context.Canceled}}
	c := m.Replay(&fakeReplay{answers: append([]replayAnswer{}, answers...)})
	for i, a := range answers {
		replayed, err := c.Remember(context.Background(), "client", fmt.Sprint(i), time.Minute)
		if replayed != a.replayed || !errors.Is(err, a.err) {
			t.Errorf("check %d answered (%v, %v), the cache said (%v, %v)", i, replayed, err, a.replayed, a.err)
		}
	}
	with := func(result string) []string { return []string{"replica", "r1", "result", result} }
	check(t, scrape(t, m),
		series{"ironlink_hub_replay_cache_checks_total", with("fresh"), 2},
		series{"ironlink_hub_replay_cache_checks_total", with("replayed"), 1},
		series{"ironlink_hub_replay_cache_checks_total", with("error"), 1})
}

// The roster and link gauges read their sources at every scrape.
func TestRosterAndLinkGaugesFollowTheirSources(t *testing.T) {
	m := metrics.New("r1")
	var rosterErr error
	links := 0
	m.WatchRoster(func() error { return rosterErr })
	m.WatchLinks(func() int { return links })
	r := []string{"replica", "r1"}
	check(t, scrape(t, m), series{"ironlink_hub_roster_reload_failing", r, 0}, series{"ironlink_hub_links_open", r, 0})
	rosterErr, links = errors.New("bad roster"), 7
	check(t, scrape(t, m), series{"ironlink_hub_roster_reload_failing", r, 1}, series{"ironlink_hub_links_open", r, 7})
}

type fakeDB struct {
	sites    []store.SiteLink
	open     []store.OpenCommands
	sitesErr error
	openErr  error
}

func (f *fakeDB) SiteLinks(context.Context) ([]store.SiteLink, error) {
	if f.sitesErr != nil {
		return nil, f.sitesErr
	}
	return f.sites, nil
}

func (f *fakeDB) OpenCommandStats(context.Context) ([]store.OpenCommands, error) {
	if f.openErr != nil {
		return nil, f.openErr
	}
	return f.open, nil
}

// The scrape-time collector reports each site's link, staleness and last
// contact, links per replica and open commands per state (every state,
// 0 when none), and whether the database answered; when it does not, the
// database-wide series are left out rather than reported as zero.
func TestDatabaseSeriesAtScrapeTime(t *testing.T) {
	seen := time.Unix(1_700_000_000, 500_000_000)
	db := &fakeDB{
		sites: []store.SiteLink{{Site: "a", Replica: "r1", LastSeen: seen}, {Site: "b", Replica: "r2", Stale: true, LastSeen: seen},
			{Site: "c", Replica: "r1"}, {Site: "new"}},
		open: []store.OpenCommands{{State: store.CommandPending, Count: 4, OldestCreated: time.Now().Add(-time.Hour)},
			{State: store.CommandFailed, Count: 1, OldestCreated: time.Now().Add(-time.Minute)}},
	}
	m := metrics.New("r1")
	m.WatchDatabase(db, time.Second, testlog.New(t))
	p := scrape(t, m)
	check(t, p,
		series{"ironlink_hub_site_linked", []string{"site", "a", "link_replica", "r1"}, 1},
		series{"ironlink_hub_site_linked", []string{"site", "new", "link_replica", ""}, 0},
		series{"ironlink_hub_site_stale", []string{"site", "b"}, 1},
		series{"ironlink_hub_site_stale", []string{"site", "a"}, 0},
		series{"ironlink_hub_site_last_seen_timestamp_seconds", []string{"site", "a"}, 1_700_000_000.5},
		series{"ironlink_hub_replica_links", []string{"link_replica", "r1"}, 2},
		series{"ironlink_hub_replica_links", []string{"link_replica", "r2"}, 1},
		series{"ironlink_hub_replica_links", []string{"link_replica", ""}, 1},
		series{"ironlink_hub_commands_open", []string{"state", "PENDING"}, 4},
		series{"ironlink_hub_commands_open", []string{"state", "SENT"}, 0},
		series{"ironlink_hub_commands_open", []string{"state", "FAILED"}, 1},
		series{"ironlink_hub_command_oldest_age_seconds", []string{"state", "SENT"}, 0},
		series{"ironlink_hub_database_scrape_ok", nil, 1})
	absent(t, p, "ironlink_hub_site_last_seen_timestamp_seconds", "site", "new") // never seen
	if age, _ := p.Value("ironlink_hub_command_oldest_age_seconds", "state", "PENDING"); age < 3599 || age > 3700 {
		t.Errorf("oldest PENDING command is %v s old, want about an hour", age)
	}

	db.openErr = errors.New("timeout")
	p = scrape(t, m)
	check(t, p, series{"ironlink_hub_database_scrape_ok", nil, 0}, series{"ironlink_hub_site_linked", []string{"site", "a"}, 1})
	absent(t, p, "ironlink_hub_commands_open")

	db.sitesErr = errors.New("connection refused")
	p = scrape(t, m)
	check(t, p, series{"ironlink_hub_database_scrape_ok", nil, 0})
	absent(t, p, "ironlink_hub_site_linked")
	absent(t, p, "ironlink_hub_commands_open")
}

// The policy's hooks count decisions by action and dry run, time only live
// automatic quarantines, and follow leadership; its scrape-time gauges read
// each site's guard and pending actions (none when the read fails).
func TestPolicySeries(t *testing.T) {
	m := metrics.New("r1")
	var states []metrics.PolicySiteState
	var statesErr error
	h := m.WatchPolicy(func(context.Context) ([]metrics.PolicySiteState, error) { return states, statesErr }, testlog.New(t))
	h.Leading(true)
	h.Decided("QUARANTINE", false, 2*time.Second)
	h.Decided("QUARANTINE", true, 2*time.Second) // dry run: not timed
	h.Decided("PENDING", false, time.Second)     // not a quarantine: not timed
	h.Decided("RELEASE", false, 0)
	var racks []metrics.TrippedDomain
	for i := range metrics.MaxDomainSeries + 5 {
		racks = append(racks, metrics.TrippedDomain{Label: "rack", Value: fmt.Sprintf("r%02d", i), Held: 1})
	}
	racks[24].Held = 9 // holds the most: among the series kept
	states = []metrics.PolicySiteState{{Site: "a", Tripped: true, PendingHeld: 3, PendingStale: 1}, {Site: "b"},
		{Site: "c", TrippedDomains: racks}}
	r := []string{"replica", "r1"}
	with := func(kv ...string) []string { return append(append([]string{}, r...), kv...) }
	check(t, scrape(t, m),
		series{"ironlink_policy_evaluator_leading", r, 1},
		series{"ironlink_policy_decisions_total", with("action", "QUARANTINE", "dry_run", "false"), 1},
		series{"ironlink_policy_decisions_total", with("action", "QUARANTINE", "dry_run", "true"), 1},
		series{"ironlink_policy_decisions_total", with("action", "PENDING", "dry_run", "false"), 1},
		series{"ironlink_policy_decisions_total", with("action", "RELEASE", "dry_run", "false"), 1},
		series{"ironlink_policy_decision_latency_seconds", r, 1},
		series{"ironlink_policy_decision_latency_seconds_sum", r, 2},
		series{"ironlink_policy_guard_tripped", []string{"site", "a"}, 1},
		series{"ironlink_policy_guard_tripped", []string{"site", "b"}, 0},
		series{"ironlink_policy_pending_actions", []string{"site", "a", "reason", "HeldByGuard"}, 3},
		series{"ironlink_policy_pending_actions", []string{"site", "a", "reason", "StaleTrigger"}, 1},
		series{"ironlink_policy_label_guards_tripped", []string{"site", "c"}, 25},
		series{"ironlink_policy_label_guards_tripped", []string{"site", "a"}, 0},
		series{"ironlink_policy_label_guard_tripped", []string{"site", "c", "label", "rack", "value", "r24"}, 1},
		series{"ironlink_policy_label_guard_tripped", []string{"site", "c", "label", "rack", "value", "r00"}, 1})
	// A per-label guard's series is bounded per site: the 20 holding the
	// most, of 25 tripped.
	p0 := scrape(t, m)
	if n := len(p0.Series("ironlink_policy_label_guard_tripped")); n != metrics.MaxDomainSeries {
		t.Errorf("%d ironlink_policy_label_guard_tripped series for 25 tripped racks, want %d", n, metrics.MaxDomainSeries)
	}
	if _, ok := p0.Value("ironlink_policy_label_guard_tripped", "site", "c", "label", "rack", "value", "r23"); ok {
		t.Error("rack r23 (among the 5 holding least, last by value) has a series past the bound")
	}
	h.Leading(false)
	statesErr = errors.New("down")
	p := scrape(t, m)
	check(t, p, series{"ironlink_policy_evaluator_leading", r, 0})
	absent(t, p, "ironlink_policy_guard_tripped")
}

// TestLiveHeapExported: go_gc_heap_live_bytes (the heap the last collection
// found live, which the soak's memory invariant reads) is exported next to
// the memstats, and is positive after a collection.
func TestLiveHeapExported(t *testing.T) {
	runtime.GC()
	p := scrape(t, metrics.New("r1"))
	live, ok := p.Value("go_gc_heap_live_bytes")
	if !ok || live <= 0 {
		t.Fatalf("go_gc_heap_live_bytes = %v (present %v), want > 0", live, ok)
	}
	if _, ok := p.Value("go_memstats_heap_alloc_bytes"); !ok {
		t.Fatal("go_memstats_heap_alloc_bytes is gone")
	}
}

package metrics_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/promtest"
	"github.com/ironlink/ironlink/satellite/metrics"
)

// Readiness: the link may be down while it retries within LinkGrace, and a
// poll must have completed within 3 poll intervals (or, before the first,
// within 3 intervals of the start).
func TestReadyFollowsLinkAndPolls(t *testing.T) {
	m := metrics.New()
	m.SetReadiness(metrics.ReadyConfig{PollInterval: 10 * time.Second, LinkGrace: time.Minute})
	start := time.Now()
	steps := []struct {
		name      string
		do        func()
		at        time.Duration
		wantLink  bool // ErrLinkDown expected
		wantStale bool // ErrPollStale expected
	}{
		{name: "just started: link connecting, first poll due", at: 5 * time.Second},
		{name: "no poll within 3 intervals of the start", at: 31 * time.Second, wantStale: true},
		{name: "a poll completed", do: func() { m.PollDone(time.Second) }, at: 0},
		{name: "link down beyond its grace", at: 61 * time.Second, wantLink: true, wantStale: true},
		{name: "link up, poll fresh", do: func() { m.LinkState(true); m.PollDone(time.Second) }, at: 0},
		{name: "link up, poll old", at: 31 * time.Second, wantStale: true},
		{name: "link just dropped: retrying within grace", do: func() { m.LinkState(false); m.PollDone(time.Second) }, at: 29 * time.Second},
		{name: "link down for longer than its grace", at: 61 * time.Second, wantLink: true, wantStale: true},
	}
	var base time.Time
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.do != nil {
				s.do()
				base = time.Now()
			}
			if base.IsZero() {
				base = start
			}
			err := m.Ready(base.Add(s.at))
			if errors.Is(err, metrics.ErrLinkDown) != s.wantLink || errors.Is(err, metrics.ErrPollStale) != s.wantStale {
				t.Errorf("Ready = %v; want link down %v, poll stale %v", err, s.wantLink, s.wantStale)
			}
		})
	}
}

// The listener answers /healthz, /readyz (503 with the reason until a poll
// completed) and /metrics with the duration histograms, the link gauge, the
// outbox depth and the last poll time.
func TestListenerServesProbesAndLinkMetrics(t *testing.T) {
	m := metrics.New()
	m.SetReadiness(metrics.ReadyConfig{PollInterval: time.Millisecond, LinkGrace: time.Hour})
	m.SetOutbox(func() int { return 3 })
	addr, get := serve(t, m)
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz %d, want 200", code)
	}
	time.Sleep(5 * time.Millisecond) // beyond 3 poll intervals without a poll
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no recent poll") {
		t.Errorf("/readyz before any poll: %d %q, want 503 naming the poll", code, body)
	}
	m.SetReadiness(metrics.ReadyConfig{PollInterval: time.Hour, LinkGrace: time.Hour})
	m.PollDone(1500 * time.Millisecond)
	m.SweepDone(2*time.Second, false)
	m.ResyncDone(time.Second)
	m.LinkState(true)
	if code, body := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after a poll with the link up: %d %q, want 200", code, body)
	}
	page := promtest.Scrape(t, "http://"+addr+"/metrics")
	cases := []struct {
		name, series string
		labels       []string
		want         float64
	}{
		{"one poll timed", "ironlink_satellite_poll_duration_seconds", nil, 1},
		{"its duration", "ironlink_satellite_poll_duration_seconds_sum", nil, 1.5},
		{"an incomplete sweep", "ironlink_satellite_sweep_duration_seconds", []string{"complete", "false"}, 1},
		{"one resync", "ironlink_satellite_resync_duration_seconds", nil, 1},
		{"link up", "ironlink_satellite_link_up", nil, 1},
		{"outbox depth", "ironlink_satellite_outbox_batches", nil, 3},
	}
	for _, tc := range cases {
		if v, ok := page.Value(tc.series, tc.labels...); !ok || v != tc.want {
			t.Errorf("%s: %s%v = %v (present %v), want %v", tc.name, tc.series, tc.labels, v, ok, tc.want)
		}
	}
	if v, _ := page.Value("ironlink_satellite_last_successful_poll_timestamp_seconds"); time.Since(time.UnixMilli(int64(v*1e3))) > time.Minute {
		t.Errorf("last successful poll timestamp %v is not now", v)
	}
	if _, ok := page.Value("ironlink_satellite_last_poll_duration_seconds"); ok {
		t.Error("the old last_poll_duration gauge is still exported; the histogram replaces it")
	}
}

// serve runs m's listener on a free loopback port until the test ends and
// returns its address and a GET of a path on it (status and body), retried
// until the listener answers.
func serve(t *testing.T, m *metrics.Satellite) (addr string, get func(path string) (int, string)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = m.Serve(ctx, addr) }()
	return addr, func(path string) (int, string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			resp, err := http.Get("http://" + addr + path)
			if err != nil {
				if time.Now().After(deadline) {
					t.Fatal(err)
				}
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode, string(b)
		}
	}
}

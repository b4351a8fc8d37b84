package app

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Validate fills every unset setting from Defaults once, keeps what was
// set (0 max-connection-age = never), leaves its receiver alone and names
// every problem at once.
func TestValidateFillsDefaultsOnce(t *testing.T) {
	in := Options{DatabaseURL: "postgres://x/y", NoAuth: true, Plaintext: true, StaleAfter: 2 * time.Minute, Replica: "r1"}
	got, err := in.Validate()
	if err != nil {
		t.Fatal(err)
	}
	d := Defaults()
	cases := []struct {
		name      string
		got, want any
	}{
		{"listen", got.Listen, d.Listen},
		{"audience", got.Audience, d.Audience},
		{"stale-after kept", got.StaleAfter, 2 * time.Minute},
		{"max-connection-age 0 kept (never)", got.MaxConnectionAge, time.Duration(0)},
		{"heartbeat", got.Link.HeartbeatInterval, d.Link.HeartbeatInterval},
		{"resend-after", got.Link.Delivery.ResendAfter, d.Link.Delivery.ResendAfter},
		{"max failure backoff", got.Link.Delivery.MaxFailureBackoff, 5 * time.Minute},
		{"link replica", got.Link.Replica, "r1"},
		{"receiver untouched", in.Listen, ""},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	_, err = Options{KeepaliveMinTime: time.Hour, StaleAfter: time.Millisecond}.Validate()
	for _, w := range []string{"--database-url", "--roster", "--tls-cert", "stale-after 1ms is below 1s", "keepalive min time 1h0m0s"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
}

// TestValidateStaleAfterAboveLastSeenFlush: a live site's last_seen_at lags
// by up to the flush interval, so stale-after must exceed it.
func TestValidateStaleAfterAboveLastSeenFlush(t *testing.T) {
	base := Options{DatabaseURL: "postgres://x/y", NoAuth: true, Plaintext: true}
	c := base
	c.StaleAfter, c.Link.LastSeenFlush = 5*time.Second, 5*time.Second
	if _, err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--last-seen-flush") {
		t.Fatalf("stale-after equal to the flush interval: %v, want an error naming --last-seen-flush", err)
	}
	c.StaleAfter = 6 * time.Second
	got, err := c.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if got.CommandPoolConns != Defaults().CommandPoolConns || got.Link.LastSeenFlush != 5*time.Second {
		t.Fatalf("filled: command pool %d, flush %s", got.CommandPoolConns, got.Link.LastSeenFlush)
	}
	if d := Defaults(); d.StaleAfter <= d.Link.LastSeenFlush {
		t.Fatalf("defaults: stale-after %s not above the flush interval %s", d.StaleAfter, d.Link.LastSeenFlush)
	}
}

// Run takes only a Config that Options.Validate made without an error: a
// zero Config, or the one returned with Validate's error, is refused
// before anything starts.
func TestRunRefusesAConfigNotValidated(t *testing.T) {
	bad, err := Options{}.Validate()
	if err == nil {
		t.Fatal("empty Options validated")
	}
	for name, cfg := range map[string]Config{"zero": {}, "invalid": bad} {
		if err := Run(context.Background(), cfg, slog.New(slog.DiscardHandler)); !errors.Is(err, errNotValidated) {
			t.Errorf("%s Config: Run returned %v, want errNotValidated", name, err)
		}
	}
}

package ctl

import (
	"testing"
	"time"
)

func TestParseAsOf(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{in: ""},
		{in: "2026-12-01T03:00:00Z", want: time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)},
		{in: "2026-12-01T04:00:00+01:00", want: time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)},
		{in: "9h", want: now.Add(-9 * time.Hour)},
		{in: " 90m ", want: now.Add(-90 * time.Minute)},
		{in: "-2h", bad: true},
		{in: "0s", bad: true},
		{in: "yesterday", bad: true},
		{in: "2026-12-01", bad: true},
	} {
		ts, err := parseAsOf(tc.in, now)
		switch {
		case tc.bad:
			if err == nil {
				t.Errorf("%q: %v, want a usage error", tc.in, ts.AsTime())
			} else if e, ok := err.(*Error); !ok || e.Code != ExitUsage {
				t.Errorf("%q: %v, want a usage error", tc.in, err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.want.IsZero() && ts != nil:
			t.Errorf("%q: %v, want unset", tc.in, ts.AsTime())
		case !tc.want.IsZero() && !ts.AsTime().Equal(tc.want):
			t.Errorf("%q: %v, want %v", tc.in, ts.AsTime(), tc.want)
		}
	}
}

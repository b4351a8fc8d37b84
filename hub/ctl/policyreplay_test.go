package ctl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `policy replay`'s period and candidate file: RFC 3339 times or durations
// ago, --to defaulting to now, the file sent as it is; a missing or
// malformed --from is a usage error naming the flag.
func TestPolicyReplayRequest(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	cand := filepath.Join(t.TempDir(), "candidate.yaml")
	if err := os.WriteFile(cand, []byte("policy: {default: {enabled: true}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := replayFlags{from: "24h", policyFile: cand, site: "demo"}
	req, err := f.request(now)
	if err != nil {
		t.Fatal(err)
	}
	if !req.GetFromTime().AsTime().Equal(now.Add(-24*time.Hour)) || !req.GetToTime().AsTime().Equal(now) ||
		!strings.Contains(req.GetPolicyYaml(), "enabled: true") || req.GetSite() != "demo" {
		t.Errorf("request %v", req)
	}
	f = replayFlags{from: "2026-12-01T00:00:00Z", to: "2026-12-02T00:00:00Z"}
	if req, err = f.request(now); err != nil || req.GetToTime().AsTime().Day() != 2 || req.GetPolicyYaml() != "" {
		t.Errorf("request %v, %v", req, err)
	}
	for _, c := range []struct {
		f    replayFlags
		want string
	}{
		{replayFlags{}, "--from is required"},
		{replayFlags{from: "yesterday"}, `--from "yesterday"`},
		{replayFlags{from: "1h", to: "-5m"}, `--to "-5m"`},
	} {
		if _, err := c.f.request(now); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.f, err, c.want)
		}
	}
}

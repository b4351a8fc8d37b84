package ctl

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
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

// `policy replay` prints the ladder counts per day and, with --all, every
// ladder (steps, outcome, * when it differs from the record) and the
// approvals it took as inputs.
func TestPrintReplayLadders(t *testing.T) {
	at := timestamppb.New(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	r := &ironlinkv1.ReplayPolicyResponse{
		Days: []*ironlinkv1.ReplayDay{{Site: "site-a", Date: "2026-12-03", Quarantines: 2, LadderSteps: 3, Fixes: 1, Releases: 1, Handoffs: 1, Approvals: 1}},
		Remediations: []*ironlinkv1.ReplayedRemediation{
			{DeviceId: "dev-a", Site: "site-a", Rule: "deploy", StartedTime: at, Outcome: "FIXED", FixedStep: 2, Released: true,
				Steps: []*ironlinkv1.ReplayedStep{{Step: 1, Kind: "REBOOT", Result: "FAILED"}, {Step: 2, Kind: "REPROVISION", Result: "SUCCEEDED"}}},
			{DeviceId: "dev-b", Site: "site-a", Rule: "deploy", StartedTime: at, Outcome: "HANDED_OFF", HandoffReason: "LadderExhausted", Differs: true,
				Steps: []*ironlinkv1.ReplayedStep{{Step: 1, Kind: "REBOOT", Result: "FAILED"}}},
		},
		Approvals:              []*ironlinkv1.ReplayedApproval{{DeviceId: "dev-c", Site: "site-a", Rule: "deploy", Approved: true, ResolvedBy: "alice", ResolvedTime: at}},
		RemediationDifferences: 1,
	}
	var out bytes.Buffer
	a := &app{opts: Options{Stdout: &out}}
	a.printReplay(r, true)
	for _, want := range []string{"STEPS", "FIXES", "RELEASES", "HANDOFFS", "2 remediations; 1 differ from the recorded ones",
		"FIXED by step 2, released", "1 REBOOT FAILED; 2 REPROVISION SUCCEEDED", "HANDED_OFF (LadderExhausted)", "approved", "alice"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(out.String(), "*") {
		t.Errorf("the differing ladder is not marked:\n%s", out.String())
	}
}

package ctl

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/boundedread"
)

// replayFlags are the flags of `ironlink policy replay`.
type replayFlags struct {
	from, to, policyFile, site, output string
	all                                bool
}

func (a *app) newPolicyReplay() *cobra.Command {
	var f replayFlags
	cmd := &cobra.Command{
		Use:   "replay --from T1 [--to T2] [--policy FILE]",
		Short: "What a policy would have done over a period of the stored history: quarantines, pending approvals, guard trips, ladder steps, releases, handoffs per site and day; writes nothing",
		Long: `Replay a candidate policy file (--policy, the --policy-file YAML) or the policy in force over
the stored status and condition history of a period (PolicyService.ReplayPolicy; docs/reference/policy.md "Replay").
T1 and T2 are RFC 3339 times or durations ago (24h); --to defaults to now. The table counts per site and
day (decisions, ladder steps, fixes, releases, handoffs, and the operators' recorded approvals and
rejections, taken as inputs); the last lines say how many triggers' replayed decision, and how many
quarantines' remediation, differ from the recorded ones (0 for the live policy over a period in which it
ran). --all lists every decision and every ladder, * marking those that differ, and the approvals.`,
		Example: `  ironlink policy replay --from 168h
  ironlink policy replay --from 2026-12-01T00:00:00Z --to 2026-12-03T00:00:00Z --policy candidate.yaml --all`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := f.request(time.Now())
			if err != nil {
				return err
			}
			c, err := a.connectFor(f.output, outTable, outJSON, outYAML)
			if err != nil {
				return err
			}
			cctx, cancel := c.call(cmd.Context())
			defer cancel()
			r, err := c.policy.ReplayPolicy(cctx, req)
			if err != nil {
				return c.explain(err)
			}
			if f.output != outTable {
				return writeProto(a.opts.Stdout, f.output, r)
			}
			a.printReplay(r, f.all)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.from, "from", "", "start of the period: RFC 3339 time or a duration ago (required)")
	fl.StringVar(&f.to, "to", "", "end of the period: RFC 3339 time or a duration ago (default now)")
	fl.StringVar(&f.policyFile, "policy", "", "candidate policy file (YAML, as --policy-file); default the policy in force")
	fl.StringVar(&f.site, "site", "", "only this site")
	fl.BoolVar(&f.all, "all", false, "list every replayed decision and ladder and the approvals taken as inputs, not only the counts")
	fl.StringVarP(&f.output, "output", "o", "", "json or yaml: the ReplayPolicy answer")
	return cmd
}

// request checks the flags and builds the request (now for durations ago).
func (f *replayFlags) request(now time.Time) (*ironlinkv1.ReplayPolicyRequest, error) {
	if f.from == "" {
		return nil, usageErrf("--from is required (RFC 3339 time or a duration ago, e.g. 168h)")
	}
	from, err := parseAgo("--from", f.from, now)
	if err != nil {
		return nil, err
	}
	to := now
	if f.to != "" {
		if to, err = parseAgo("--to", f.to, now); err != nil {
			return nil, err
		}
	}
	req := &ironlinkv1.ReplayPolicyRequest{FromTime: timestamppb.New(from), ToTime: timestamppb.New(to), Site: f.site}
	if f.policyFile != "" {
		b, err := boundedread.File(f.policyFile, boundedread.SmallLimit)
		if err != nil {
			return nil, usageErrf("--policy: %v", err)
		}
		req.PolicyYaml = string(b)
	}
	return req, nil
}

// parseAgo reads an RFC 3339 time or a duration before now.
func parseAgo(flag, v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usageErrf("%s %q: want an RFC 3339 time (2026-12-01T00:00:00Z) or a duration ago (24h)", flag, v)
}

// printReplay prints the counts per site and day, and with all every
// decision.
func (a *app) printReplay(r *ironlinkv1.ReplayPolicyResponse, all bool) {
	w := a.opts.Stdout
	n := func(v int32) string { return strconv.Itoa(int(v)) }
	t := newTable(w, "", "SITE", "DAY", "QUARANTINES", "PENDING", "SKIPS", "GUARD-TRIPS", "STEPS", "FIXES", "RELEASES", "HANDOFFS", "APPROVALS", "REJECTIONS")
	for _, d := range r.GetDays() {
		t.row(d.GetSite(), d.GetDate(), n(d.GetQuarantines()), n(d.GetPending()), n(d.GetSkips()), n(d.GetGuardTrips()),
			n(d.GetLadderSteps()), n(d.GetFixes()), n(d.GetReleases()), n(d.GetHandoffs()), n(d.GetApprovals()), n(d.GetRejections()))
	}
	t.flush()
	fmt.Fprintf(w, "%d decisions; %d differ from the recorded ones\n", len(r.GetDecisions()), r.GetDifferences())
	fmt.Fprintf(w, "%d remediations; %d differ from the recorded ones\n", len(r.GetRemediations()), r.GetRemediationDifferences())
	if !all {
		return
	}
	defer a.printReplayRemediations(r)
	t = newTable(w, "", "", "DECIDED", "SITE", "DEVICE", "ACTION", "REASON", "RULE", "DETAIL")
	for _, d := range r.GetDecisions() {
		mark, action := "", d.GetAction()
		if d.GetDiffers() {
			mark = "*"
		}
		var tags []string
		if d.GetDryRun() {
			tags = append(tags, "dry-run")
		}
		if d.GetTripsGuard() {
			tags = append(tags, "trips guard")
		}
		if len(tags) > 0 {
			action += " (" + strings.Join(tags, ", ") + ")"
		}
		t.row(mark, d.GetDecidedTime().AsTime().UTC().Format(time.RFC3339), d.GetSite(), d.GetDeviceId(), action, d.GetReason(), d.GetRule(), d.GetDetail())
	}
	t.flush()
}

// printReplayRemediations lists the replayed ladders (* marking those that
// differ from the recorded ones) and the approvals taken as inputs.
func (a *app) printReplayRemediations(r *ironlinkv1.ReplayPolicyResponse) {
	w := a.opts.Stdout
	t := newTable(w, "", "", "STARTED", "SITE", "DEVICE", "RULE", "OUTCOME", "STEPS")
	for _, rm := range r.GetRemediations() {
		mark, outcome := "", rm.GetOutcome()
		if rm.GetDiffers() {
			mark = "*"
		}
		switch {
		case rm.GetFixedStep() > 0:
			outcome += fmt.Sprintf(" by step %d", rm.GetFixedStep())
			if rm.GetReleased() {
				outcome += ", released"
			}
		case rm.GetHandoffReason() != "":
			outcome += " (" + rm.GetHandoffReason() + ")"
		case rm.GetWaiting() != "":
			outcome += ", waiting: " + rm.GetWaiting()
		}
		var steps []string
		for _, st := range rm.GetSteps() {
			steps = append(steps, fmt.Sprintf("%d %s %s", st.GetStep(), st.GetKind(), st.GetResult()))
		}
		t.row(mark, rm.GetStartedTime().AsTime().UTC().Format(time.RFC3339), rm.GetSite(), rm.GetDeviceId(), rm.GetRule(), outcome, strings.Join(steps, "; "))
	}
	t.flush()
	if len(r.GetApprovals()) == 0 {
		return
	}
	t = newTable(w, "", "RESOLVED", "SITE", "DEVICE", "RULE", "ANSWER", "BY")
	for _, ap := range r.GetApprovals() {
		answer := "rejected"
		if ap.GetApproved() {
			answer = "approved"
		}
		t.row(ap.GetResolvedTime().AsTime().UTC().Format(time.RFC3339), ap.GetSite(), ap.GetDeviceId(), ap.GetRule(), answer, ap.GetResolvedBy())
	}
	t.flush()
}

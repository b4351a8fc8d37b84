package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/wire"
)

// newWatchCommand is `ironlink watch`: it follows the hub's change feed
// (FleetService.WatchFleet), one line per device status change, command or
// operation state change, policy decision or pending action resolution as
// it commits, and resumes from its last cursor when the
// connection to the hub breaks (another replica answers) or the hub ends
// the stream because this watch fell behind (WATCH_FELL_BEHIND).
func (a *app) newWatchCommand() *cobra.Command {
	var ff feedFlags
	var once bool
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Follow the fleet's change feed: status, command, operation and policy changes as they commit",
		Long: `watch prints every device status change, command and operation state
change, quarantine policy decision and pending action resolution of the
fleet as the hub commits it, oldest first, until interrupted. Each change
has a cursor (shown by -o wide and -o json): ` + "`--cursor`" + ` resumes after it,
on any hub replica, without losing or repeating a change. When the
connection to the hub breaks, or the hub ends the stream because watch
fell behind (it read too slowly: the hub's --watch-send-timeout), watch
says so, reconnects and resumes by itself; on
Ctrl-C it prints the cursor to resume from. --device and -l (a selector, as
quarantine --selector takes it, matched once at the start) follow some
devices only; --since starts that long ago (from the changes the hub keeps).
Reasons are cut to 80 characters; -o wide prints them in full.`,
		Example: `  ironlink watch
  ironlink watch --site demo --status faulted,maintenance
  ironlink watch --device node-007 --since 1h   # one device, from an hour ago on
  ironlink watch -l 'site=demo,name=gpu-*'
  ironlink watch --kind command -o wide
  ironlink watch --kind operation,policy   # operations, policy decisions and pending actions
  ironlink watch --cursor 123456.1.42      # resume after a cursor
  ironlink watch --from-oldest -o json     # the whole retained feed, one JSON object per message`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, req, filter, err := a.openFeed(cmd, &ff, nil)
			if err != nil {
				return err
			}
			// The resume hint repeats the filters given.
			var resume []string
			for _, f := range []string{"site", "status", "kind"} {
				if v, _ := cmd.Flags().GetString(f); v != "" {
					resume = append(resume, "--"+f+" "+v)
				}
			}
			if ff.selector != "" {
				resume = append(resume, "-l '"+ff.selector+"'")
			}
			for _, d := range ff.devices {
				resume = append(resume, "--device "+d)
			}
			return a.follow(cmd.Context(), c, req, ff.output, once, strings.Join(resume, " "), filter)
		},
	}
	ff.register(cmd, a, true)
	cmd.Flags().BoolVar(&once, "no-reconnect", false, "end when the connection to the hub breaks instead of resuming")
	return cmd
}

// watchKindValues are the event kinds each `ironlink watch --kind` word
// stands for.
var watchKindValues = map[string][]ironlinkv1.FleetEventKind{
	"status":      {ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_DEVICE_STATUS},
	"command":     {ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_COMMAND_STATE},
	"operation":   {ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_OPERATION_STATE},
	"decision":    {ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_POLICY_DECISION},
	"pending":     {ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_PENDING_ACTION},
	"policy":      {ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_POLICY_DECISION, ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_PENDING_ACTION},
	"remediation": {ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_REMEDIATION},
	"validation":  {ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_VALIDATION},
}

// watchKinds are the values of `ironlink watch --kind`.
var watchKinds = []string{"status", "command", "operation", "decision", "pending", "policy", "remediation", "validation"}

// follow streams req, printing each message, and reconnects from the last
// cursor after a broken connection (Unavailable) or a stream the hub ended
// because this watch fell behind (ResourceExhausted WATCH_FELL_BEHIND,
// said on stderr) unless once.
// filters is printed in the resume hint after --cursor.
// filter (nil: everything) picks the changes printed and may end the feed.
func (a *app) follow(ctx context.Context, c *client, req *ironlinkv1.WatchFleetRequest, output string, once bool, filters string, filter *feedFilter) error {
	w := a.opts.Stdout
	last := req.GetCursor()
	lag := &lagNote{live: req.GetCursor() == "" && !req.GetFromOldest() && !filter.window(), w: a.opts.Stderr}
	defer func() {
		if last != "" && ctx.Err() != nil {
			fmt.Fprintf(a.opts.Stderr, "resume with: ironlink watch --cursor %s%s\n", last, strings.TrimRight(" "+filters, " "))
		}
	}()
	for {
		if last != "" {
			req.Cursor = last
		}
		err := a.followOnce(ctx, c, req, output, w, &last, filter, lag)
		if ctx.Err() != nil || errors.Is(err, errFeedDone) {
			return nil
		}
		behind := fellBehind(err)
		if once || !(status.Code(err) == codes.Unavailable || errors.Is(err, errStreamEnded) || behind) || last == "" {
			return c.explain(err)
		}
		if behind {
			// Every message the hub queued before its status was read:
			// last is the cursor its message names.
			fmt.Fprintf(a.opts.Stderr, "the hub ended the stream: %s; resuming after cursor %s\n", status.Convert(err).Message(), last)
		} else {
			fmt.Fprintf(a.opts.Stderr, "connection to the hub lost (%s); resuming after cursor %s\n", status.Convert(err).Message(), last)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// reasonWatchFellBehind is the ErrorInfo reason of the ResourceExhausted
// that ends a WatchFleet stream whose consumer took no message for the
// hub's --watch-send-timeout (fleet.proto, WatchFleet); its metadata
// "cursor" is where to resume.
const reasonWatchFellBehind = "WATCH_FELL_BEHIND"

// fellBehind reports whether err is the hub's WATCH_FELL_BEHIND.
func fellBehind(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted {
		return false
	}
	ei := errorInfo(st)
	return ei != nil && ei.GetReason() == reasonWatchFellBehind
}

// lagWarnAt is the lag (WatchFleetResponse.behind) from which a live
// `ironlink watch` says on stderr that it is behind, at most once per
// lagWarnAt.
const lagWarnAt = time.Minute

// lagNote says on stderr when a watch that started at the feed's head
// (no --cursor, --since or --from-oldest: a replay is behind by design)
// falls lagWarnAt or more behind the fleet, at most once per lagWarnAt,
// and when it has caught up again.
type lagNote struct {
	live   bool
	w      io.Writer
	warned time.Time // the last warning; zero once caught up
}

func (l *lagNote) note(m *ironlinkv1.WatchFleetResponse) {
	if l == nil || !l.live || m.GetEvent() == nil {
		return
	}
	b := m.GetBehind()
	switch {
	case b != nil && b.AsDuration() >= lagWarnAt && time.Since(l.warned) >= lagWarnAt:
		fmt.Fprintf(l.w, "this watch is %s behind the fleet: changes come faster than it prints them (none is lost; it catches up when they slow down)\n",
			b.AsDuration().Round(time.Second))
		l.warned = time.Now()
	case b == nil && !l.warned.IsZero():
		fmt.Fprintln(l.w, "this watch has caught up with the fleet")
		l.warned = time.Time{}
	}
}

// errStreamEnded: the hub closed a watch stream without an error (io.EOF).
// follow resumes after it as after an Unavailable, and explain words it as
// one; the CLI builds no status of its own (hub/grpcerr's guard test).
var errStreamEnded = errors.New("the hub ended the stream")

func (a *app) followOnce(ctx context.Context, c *client, req *ironlinkv1.WatchFleetRequest, output string, w io.Writer, last *string, filter *feedFilter, lag *lagNote) error {
	s, err := c.fleet.WatchFleet(ctx, req)
	if err != nil {
		return err
	}
	for first := true; ; first = false {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return errStreamEnded
		}
		if err != nil {
			return err
		}
		if first && output != outJSON && !filter.window() {
			// The hub's first message (a progress mark) says the stream is
			// open: changes from now on are printed.
			fmt.Fprintln(a.opts.Stderr, "watching for changes (Ctrl-C to stop)")
		}
		*last = m.GetCursor()
		lag.note(m)
		switch keep, done := filter.pass(m, first); {
		case done:
			return errFeedDone
		case !keep:
			continue
		}
		if output == outJSON {
			if err := writeProtoLine(w, m); err != nil {
				return err
			}
			continue
		}
		if m.GetEvent() == nil {
			continue
		}
		line := a.eventLine(m.GetEvent(), output == outWide)
		if output == outWide {
			line = m.GetCursor() + "  " + line
		}
		fmt.Fprintln(w, line)
	}
}

// eventLine renders one change: time, kind, SITE/NAME, what changed and why.
func (a *app) eventLine(e *ironlinkv1.FleetEvent, full bool) string {
	cut := cutter(full)
	at := e.GetEventTime().AsTime().UTC().Format(time.RFC3339)
	if ds := e.GetDeviceStatus(); ds != nil {
		name := ds.GetName()
		if name == "" {
			name = ds.GetDeviceId()
		}
		from := statusName(ds.GetPreviousStatus())
		if from == "" {
			from = "(new)"
		}
		return fmt.Sprintf("%s  status   %s/%s  %s -> %s  %s", at, ds.GetSite(), name, from, statusName(ds.GetStatus()), cut(ds.GetReason(), 80))
	}
	if cs := e.GetCommandState(); cs != nil {
		cm := cs.GetCommand()
		name := cs.GetDeviceName()
		if name == "" {
			name = cm.GetDeviceId()
		}
		change := "created " + commandStateName(cm.GetState())
		if cs.GetPreviousState() != ironlinkv1.CommandState_COMMAND_STATE_UNSPECIFIED {
			change = commandStateName(cs.GetPreviousState()) + " -> " + commandStateName(cm.GetState())
		}
		line := fmt.Sprintf("%s  command  %s/%s  %s %s gen %d %s (attempt %d) by %s: %q", at, cm.GetSite(), name, commandAction(cm.GetAction(), cm.GetDesired()),
			shortID(cm.GetCommandId()), cm.GetGeneration(), change, cm.GetAttempts(), cm.GetActor(), cut(cm.GetReason(), 80))
		if cm.GetLastError() != "" {
			line += "; error: " + cut(cm.GetLastError(), 100)
		}
		return line
	}
	if line := policyOrOperationLine(e, full); line != "" {
		return at + "  " + line
	}
	return at + "  (a kind of change this CLI does not know: upgrade it)"
}

// policyOrOperationLine renders an operation state change, a policy
// decision or a pending action resolution without the time ("" for other
// kinds).
func policyOrOperationLine(e *ironlinkv1.FleetEvent, full bool) string {
	cut := cutter(full)
	if ev := e.GetOperationState(); ev != nil {
		o := ev.GetOperation()
		name := o.GetDeviceName()
		if name == "" {
			name = o.GetDeviceId()
		}
		change := "created " + opStateName(o.GetState())
		if ev.GetPreviousState() != ironlinkv1.OperationState_OPERATION_STATE_UNSPECIFIED {
			change = opStateName(ev.GetPreviousState()) + " -> " + opStateName(o.GetState())
		}
		line := fmt.Sprintf("operation %s/%s  %s %s %s (attempt %d, provision state %s) by %s: %q", o.GetSite(), name,
			opKindName(o.GetKind()), shortID(o.GetOperationId()), change, o.GetAttempts(), o.GetProvisionState(), o.GetActor(), cut(o.GetReason(), 80))
		if o.GetLastError() != "" {
			line += "; error: " + cut(o.GetLastError(), 100)
		}
		return line
	}
	if pd := e.GetPolicyDecision(); pd != nil {
		d := pd.GetDecision()
		name := pd.GetDeviceName()
		if name == "" {
			name = d.GetDeviceId()
		}
		rule := "" // a decision no rule matched (e.g. SKIP NotOfferedToCustomers) has none
		if d.GetRule() != "" {
			rule = " rule " + d.GetRule()
		}
		from := d.GetFromStatus()
		if from == "" {
			from = "(new)" // the device's first status
		}
		line := fmt.Sprintf("decision %s/%s  %s (%s)%s: %s -> %s", d.GetSite(), name,
			wire.EnumName(d.GetAction(), "POLICY_ACTION_"), d.GetReason(), rule, from, d.GetToStatus())
		// A quarantine's detail opens with the rule and transition this line already
		// names ("rule R: FROM → TO, "); print the rest only.
		detail := strings.TrimPrefix(d.GetDetail(), fmt.Sprintf("rule %s: %s → %s, ", d.GetRule(), d.GetFromStatus(), d.GetToStatus()))
		if detail != "" {
			line += ", " + cut(detail, 100)
		}
		if d.GetDryRun() {
			line += " [dry-run]"
		}
		if d.GetPendingActionId() != 0 {
			line += fmt.Sprintf(" (pending action %d)", d.GetPendingActionId())
		}
		return line
	}
	if pa := e.GetPendingAction(); pa != nil {
		p := pa.GetPendingAction()
		name := p.GetDeviceName()
		if name == "" {
			name = p.GetDeviceId()
		}
		return fmt.Sprintf("pending  %s/%s  action %d %s -> %s by %s: %q", p.GetSite(), name, p.GetId(),
			wire.EnumName(pa.GetPreviousState(), "PENDING_ACTION_STATE_"), wire.EnumName(p.GetState(), "PENDING_ACTION_STATE_"),
			p.GetResolvedBy(), cut(p.GetResolutionReason(), 80))
	}
	if r := e.GetRemediation(); r != nil {
		return remediationLine(r, cut)
	}
	if v := e.GetValidation(); v != nil {
		return validationLine(v, cut)
	}
	return ""
}

// validationLine is the line of a validation run's event.
func validationLine(v *ironlinkv1.ValidationEvent, cut func(string, int) string) string {
	name := v.GetDeviceName()
	if name == "" {
		name = v.GetDeviceId()
	}
	line := fmt.Sprintf("validation %s/%s  run %s %s", v.GetSite(), name, v.GetRunId(), v.GetEvent())
	if v.GetCheck() != "" {
		line += fmt.Sprintf(" %s %s", v.GetCheck(), v.GetResult())
	}
	if v.GetDetail() != "" {
		line += ": " + cut(v.GetDetail(), 100)
	}
	return line
}

// remediationLine is the line of a remediation ladder's event.
func remediationLine(r *ironlinkv1.RemediationEvent, cut func(string, int) string) string {
	name := r.GetDeviceName()
	if name == "" {
		name = r.GetDeviceId()
	}
	line := fmt.Sprintf("remediation %s/%s  rule %s %s", r.GetSite(), name, r.GetRule(), r.GetEvent())
	if r.GetStep() > 0 {
		line += fmt.Sprintf(" step %d %s", r.GetStep(), r.GetKind())
	}
	if r.GetDetail() != "" {
		line += ": " + cut(r.GetDetail(), 100)
	}
	return line
}

// cutter returns truncate, or with full the identity: -o wide prints
// reasons and errors in full.
func cutter(full bool) func(string, int) string {
	if full {
		return func(s string, _ int) string { return s }
	}
	return truncate
}

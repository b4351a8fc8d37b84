package link

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
)

// The tasks a link's queues run (see linkLoop.commits and linkLoop.writes).
// Each runs on a queue's worker, never on the loop; it may log, and it
// returns what the loop must send or the status ending the link.

// refused turns the store error of a task about what into the status that
// ends the link (hub/grpcerr.FromStore: PermissionDenied for another site's
// ids, Aborted when a newer link fenced this one, Unavailable when the
// database fails, ...) and logs it: Error for a database failure, at most
// one a minute for all links (Server.dbFailedLog; Debug for the others),
// Info for fencing, Warn for what the satellite sent. attrs are added to the log line.
// writeFailed sorts the error of a task's store write: done is false for
// nil; a write naming something unknown (store.ErrNotFound) is logged with
// unknown and ignored; any other error is refused (see refused).
func (l *linkLoop) writeFailed(err error, what, unknown string, attrs ...any) (out outcome, done bool) {
	switch {
	case err == nil:
		return outcome{}, false
	case errors.Is(err, store.ErrNotFound):
		l.log.Warn(unknown, attrs...)
		return outcome{}, true
	}
	return l.refused(what, err, attrs...), true
}

func (l *linkLoop) refused(what string, err error, attrs ...any) outcome {
	st := grpcerr.FromStore(err)
	attrs = append(attrs, "err", err)
	switch status.Code(st) {
	case codes.Unavailable:
		l.s.dbFailedLog.Log(context.Background(), l.log, slog.LevelError, what+": database failed", attrs...)
	case codes.Aborted:
		l.log.Info("link fenced by a newer link", attrs...)
	case codes.Canceled, codes.DeadlineExceeded:
	default:
		l.log.Warn(what+" refused", attrs...)
	}
	return outcome{err: st}
}

// commitTask commits b under the link's epoch and answers with its ack.
// Its submit hands b to the group committer after the link's previous
// write (linkLoop.lastCommit), without waiting for that one's commit.
func (l *linkLoop) commitTask(b store.Batch) task {
	return task{kind: "batch", devices: max(len(b.Devices), 1), submit: func(ctx context.Context) func(context.Context) outcome {
		start := time.Now()
		p := l.s.store.SubmitBatch(ctx, l.site, l.epoch, b, l.lastCommit)
		l.lastCommit = p
		return func(ctx context.Context) outcome {
			if err := p.Wait(ctx); err != nil {
				return l.refused("batch", err, "sequence", b.Sequence)
			}
			res := p.BatchResult()
			l.log.Debug("batch committed", "sequence", b.Sequence, "devices", len(b.Devices), "snapshot", b.SnapshotID != "",
				"duplicate", res.Duplicate, "rows", res.RowsWritten, "took", time.Since(start))
			l.s.cfg.Hooks.committed(l.site, b, res, time.Since(start))
			return outcome{send: []*ironlinkv1.ConnectResponse{{Msg: &ironlinkv1.ConnectResponse_Ack{Ack: &ironlinkv1.BatchAck{
				Sequence: b.Sequence, Duplicate: res.Duplicate}}}}}
		}
	}}
}

// siteConditionsTask replaces the site's stored site conditions with conds,
// under the link's epoch (a superseded link gets ErrFenced and writes
// nothing); submitted after the link's previous write as commitTask.
func (l *linkLoop) siteConditionsTask(conds []condition.Condition) task {
	return task{kind: "site conditions", devices: 1, submit: func(ctx context.Context) func(context.Context) outcome {
		p := l.s.store.SubmitSiteConditions(ctx, l.site, l.epoch, conds, l.lastCommit)
		l.lastCommit = p
		return func(ctx context.Context) outcome {
			err := p.Wait(ctx)
			res := p.SiteConditionsResult()
			switch {
			case err != nil:
				return l.refused("site conditions", err)
			case !res.Applied:
				l.log.Info("site conditions older than the stored ones ignored")
				return outcome{}
			}
			attrs := make([]any, 0, 2*len(conds))
			for _, c := range conds {
				attrs = append(attrs, string(c.Type), string(c.Status)+"/"+c.Reason)
			}
			// A set that only refreshes observed times (the satellite resends its
			// set on every link and on each poll's signal) is not news.
			if res.Changed {
				l.log.Info("site conditions changed", attrs...)
			} else {
				l.log.Debug("site conditions unchanged", attrs...)
			}
			return outcome{}
		}
	}}
}

// resultTask records a command result.
func (l *linkLoop) resultTask(r store.CommandResult) task {
	return task{kind: "result", run: func(ctx context.Context) outcome {
		ignored, err := l.s.store.RecordResult(ctx, l.site, r)
		if out, done := l.writeFailed(err, "command result", "result for unknown command ignored", "command_id", r.CommandID); done {
			return out
		}
		l.s.cfg.Hooks.result(l.site, r.CommandID, r.Success, ignored)
		l.log.Info("command result", "command_id", r.CommandID, "device_id", r.DeviceID, "generation", r.Generation,
			"success", r.Success, "ignored", ignored, "error", r.Error,
			"failure_class", r.FailureClass, "failure_reason", r.FailureReason)
		return outcome{}
	}}
}

// correctionTask records a drift correction.
func (l *linkLoop) correctionTask(c Correction) task {
	return task{kind: "correction", run: func(ctx context.Context) outcome {
		ignored, err := l.s.store.RecordDriftCorrection(ctx, l.site, c.DeviceID, c.Generation, c.Detail, c.At)
		if out, done := l.writeFailed(err, "drift correction", "correction for unknown device ignored", "device_id", c.DeviceID); done {
			return out
		}
		if ignored {
			l.log.Info("drift correction for a generation that is not the desired one ignored", "device_id", c.DeviceID, "generation", c.Generation)
			return outcome{}
		}
		l.log.Info("drift corrected by the satellite", "device_id", c.DeviceID, "generation", c.Generation, "detail", c.Detail)
		return outcome{}
	}}
}

// desiredStatesTask reads the site's desired states and answers with them.
func (l *linkLoop) desiredStatesTask() task {
	return task{kind: "desired states", run: func(ctx context.Context) outcome {
		m, err := l.desiredStates(ctx)
		if err != nil {
			return outcome{err: err}
		}
		return outcome{send: []*ironlinkv1.ConnectResponse{m}}
	}}
}

// desiredStates reads the desired impairment state of every device of the
// site that has one, as the DesiredStates message.
func (l *linkLoop) desiredStates(ctx context.Context) (*ironlinkv1.ConnectResponse, error) {
	states, err := l.s.store.DesiredStates(ctx, l.site)
	if err != nil {
		return nil, l.refused("desired states", err).err
	}
	msg := &ironlinkv1.DesiredStates{}
	for _, d := range states {
		msg.Devices = append(msg.Devices, &ironlinkv1.DeviceDesiredState{DeviceId: d.DeviceID, Desired: impairmentToProto(d.Desired), Generation: d.Generation})
	}
	return &ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_DesiredStates{DesiredStates: msg}}, nil
}

// deliverTask reads the site's due commands (resend: SENT ones too, at link
// start) and answers with them; its follow-up marks them sent. The follow-up
// runs on the same queue before any later delivery, so a command is never
// sent twice by one decision.
//
// Each command is delivered under a "deliver command" span, a child of the
// trace context stored with it (that of the operator call that created it),
// and carries that span's W3C context to the satellite (Command.traceparent,
// tracestate), so the satellite's apply joins the operator's trace. The span
// ends when the follow-up has marked the command sent.
func (l *linkLoop) deliverTask(resend bool) task {
	return task{kind: "deliver", run: func(ctx context.Context) outcome {
		cmds, err := l.s.store.DueCommands(ctx, l.site, l.epoch, l.s.cfg.Delivery, resend, 100)
		if err != nil {
			if ctx.Err() == nil {
				l.s.warnSweepFailed(l.log, "load due commands", err)
			}
			return outcome{} // the next sweep tries again
		}
		if len(cmds) == 0 {
			return outcome{}
		}
		spans := make([]trace.Span, len(cmds))
		o := outcome{then: &task{kind: "mark sent", run: func(ctx context.Context) outcome { return l.markSent(ctx, cmds, spans) }}}
		for i, c := range cmds {
			tc := l.deliverySpan(c, &spans[i])
			o.send = append(o.send, &ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Command{Command: &ironlinkv1.Command{
				CommandId: c.ID, DeviceId: c.DeviceID, Generation: c.Generation, Desired: impairmentToProto(c.Desired),
				Reason: c.Reason, Actor: c.Actor, Redelivery: c.State == store.CommandSent,
				Traceparent: tc.Get("traceparent"), Tracestate: tc.Get("tracestate"),
			}}})
		}
		return o
	}}
}

// sweepTask is the link's periodic look for due commands (Config.
// CommandSweep): it asks the replica's cached set of sites with due
// commands (Server.siteHasDue, one query for all links per interval) and
// reads and sends the site's commands only when the site is in it.
func (l *linkLoop) sweepTask() task {
	return task{kind: "sweep", run: func(ctx context.Context) outcome {
		due, err := l.s.siteHasDue(ctx, l.site)
		if err != nil {
			if ctx.Err() == nil {
				l.s.warnSweepFailed(l.log, "look for due commands", err)
			}
			return outcome{} // the next sweep tries again
		}
		if !due {
			return outcome{}
		}
		return l.deliverTask(false).run(ctx)
	}}
}

// tracerName names the tracer of the link's spans, taken from the global
// provider at each span (a no-op one unless tracing is on).
const tracerName = "github.com/ironlink/ironlink/hub/link"

// deliverySpan starts the "deliver command" span of c in *span, a child of
// the trace context stored with c (a root span when there is none), and
// returns the W3C context to send with c: the span's own when it records,
// else the stored one unchanged (tracing off on this replica still passes
// the operator's trace on).
func (l *linkLoop) deliverySpan(c store.Command, span *trace.Span) propagation.MapCarrier {
	stored := propagation.MapCarrier{"traceparent": c.TraceParent}
	if c.TraceState != "" {
		stored["tracestate"] = c.TraceState
	}
	parent := propagation.TraceContext{}.Extract(context.Background(), stored)
	ctx, sp := otel.Tracer(tracerName).Start(parent, "deliver command", trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
		attribute.String("ironlink.site", l.site), attribute.String("ironlink.command_id", c.ID),
		attribute.String("ironlink.device_id", c.DeviceID), attribute.Int64("ironlink.generation", c.Generation),
		attribute.String("ironlink.desired", string(c.Desired)), attribute.Bool("ironlink.redelivery", c.State == store.CommandSent)))
	*span = sp
	out := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, out)
	return out
}

// markSent records that cmds went out and ends their delivery spans.
func (l *linkLoop) markSent(ctx context.Context, cmds []store.Command, spans []trace.Span) outcome {
	for i, c := range cmds {
		defer spans[i].End()
		l.s.cfg.Hooks.sent(l.site, c.ID, c.State == store.CommandSent)
		if err := l.s.store.MarkSent(ctx, c.ID); err != nil {
			l.log.Warn("mark command sent", "command_id", c.ID, "err", err)
			spans[i].RecordError(err)
		}
		l.log.InfoContext(trace.ContextWithSpan(ctx, spans[i]), "command sent", "command_id", c.ID, "device_id", c.DeviceID, "generation", c.Generation, "desired", c.Desired)
	}
	return outcome{}
}

// warnSweepFailed logs that a link's read of its due commands failed
// (msg, err): at Warn at most once a minute for all links
// (Server.sweepFailedLog), at Debug otherwise. Every link retries at each
// sweep (Config.CommandSweep), so an outage would otherwise log one line
// per link and sweep.
func (s *Server) warnSweepFailed(log *slog.Logger, msg string, err error) {
	s.sweepFailedLog.Log(context.Background(), log, slog.LevelWarn, msg, "err", err)
}

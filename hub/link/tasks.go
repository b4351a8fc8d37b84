package link

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
)

// The tasks a link's queues run (see linkLoop.commits and linkLoop.writes).
// Each runs on a queue's worker, never on the loop; it may log, and it
// returns what the loop must send or the status ending the link.

// commitTask commits b under the link's epoch and answers with its ack.
func (l *linkLoop) commitTask(b store.Batch) task {
	return task{kind: "batch", run: func(ctx context.Context) outcome {
		start := time.Now()
		res, err := l.s.store.ApplyBatch(ctx, l.site, l.epoch, b)
		switch {
		case errors.Is(err, store.ErrFenced):
			return outcome{err: err}
		case errors.Is(err, store.ErrWrongSite):
			l.log.Warn("batch refused", "err", err)
			return outcome{err: status.Error(codes.PermissionDenied, err.Error())}
		case err != nil:
			l.log.Error("commit batch", "sequence", b.Sequence, "err", err)
			return outcome{err: status.Error(codes.Unavailable, "hub could not commit the batch; reconnect and resend")}
		}
		l.log.Debug("batch committed", "sequence", b.Sequence, "devices", len(b.Devices), "snapshot", b.SnapshotID != "",
			"duplicate", res.Duplicate, "rows", res.RowsWritten, "took", time.Since(start))
		return outcome{send: []*ironlinkv1.ConnectResponse{{Msg: &ironlinkv1.ConnectResponse_Ack{Ack: &ironlinkv1.BatchAck{
			Sequence: b.Sequence, Duplicate: res.Duplicate}}}}}
	}}
}

// siteConditionsTask replaces the site's stored site conditions with conds,
// under the link's epoch (a superseded link gets ErrFenced and writes
// nothing).
func (l *linkLoop) siteConditionsTask(conds []condition.Condition) task {
	return task{kind: "site conditions", run: func(ctx context.Context) outcome {
		res, err := l.s.store.ReplaceSiteConditions(ctx, l.site, l.epoch, conds)
		switch {
		case errors.Is(err, store.ErrFenced):
			return outcome{err: err}
		case err != nil:
			l.log.Error("record site conditions", "err", err)
			return outcome{err: status.Error(codes.Unavailable, "hub could not record the site conditions; reconnect and resend")}
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
	}}
}

// resultTask records a command result.
func (l *linkLoop) resultTask(r store.CommandResult) task {
	return task{kind: "result", run: func(ctx context.Context) outcome {
		ignored, err := l.s.store.RecordResult(ctx, l.site, r)
		switch {
		case errors.Is(err, store.ErrWrongSite):
			l.log.Warn("command result refused", "err", err)
			return outcome{err: status.Error(codes.PermissionDenied, err.Error())}
		case errors.Is(err, store.ErrMismatch):
			l.log.Warn("command result refused", "err", err)
			return outcome{err: status.Error(codes.InvalidArgument, err.Error())}
		case errors.Is(err, store.ErrNotFound):
			l.log.Warn("result for unknown command ignored", "command_id", r.CommandID)
			return outcome{}
		case err != nil:
			l.log.Error("record command result", "err", err)
			return outcome{err: status.Error(codes.Unavailable, "hub could not record the result; reconnect and resend")}
		}
		l.log.Info("command result", "command_id", r.CommandID, "device_id", r.DeviceID, "generation", r.Generation,
			"success", r.Success, "ignored", ignored, "error", r.Error)
		return outcome{}
	}}
}

// correctionTask records a drift correction.
func (l *linkLoop) correctionTask(c Correction) task {
	return task{kind: "correction", run: func(ctx context.Context) outcome {
		ignored, err := l.s.store.RecordDriftCorrection(ctx, l.site, c.DeviceID, c.Generation, c.Detail, c.At)
		switch {
		case errors.Is(err, store.ErrWrongSite):
			l.log.Warn("drift correction refused", "err", err)
			return outcome{err: status.Error(codes.PermissionDenied, err.Error())}
		case errors.Is(err, store.ErrNotFound):
			l.log.Warn("correction for unknown device ignored", "device_id", c.DeviceID)
			return outcome{}
		case err != nil:
			l.log.Error("record drift correction", "err", err)
			return outcome{err: status.Error(codes.Unavailable, "hub could not record the correction; reconnect and resend")}
		case ignored:
			l.log.Info("drift correction for a generation that is not the desired one ignored", "device_id", c.DeviceID, "generation", c.Generation)
			return outcome{}
		}
		l.log.Info("drift corrected by the satellite", "device_id", c.DeviceID, "generation", c.Generation, "detail", c.Detail)
		return outcome{}
	}}
}

// touchTask records that the link is alive (a satellite heartbeat).
func (l *linkLoop) touchTask() task {
	return task{kind: "touch", run: func(ctx context.Context) outcome {
		return outcome{err: l.s.store.Touch(ctx, l.site, l.epoch)}
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
		l.log.Error("load desired states", "err", err)
		return nil, status.Error(codes.Unavailable, "hub could not read desired states; reconnect")
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
func (l *linkLoop) deliverTask(resend bool) task {
	return task{kind: "deliver", run: func(ctx context.Context) outcome {
		cmds, err := l.s.store.DueCommands(ctx, l.site, l.epoch, l.s.cfg.Delivery, resend, 100)
		if err != nil {
			if ctx.Err() == nil {
				l.log.Warn("load due commands", "err", err)
			}
			return outcome{} // the next sweep tries again
		}
		if len(cmds) == 0 {
			return outcome{}
		}
		o := outcome{then: &task{kind: "mark sent", run: func(ctx context.Context) outcome { return l.markSent(ctx, cmds) }}}
		for _, c := range cmds {
			o.send = append(o.send, &ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Command{Command: &ironlinkv1.Command{
				CommandId: c.ID, DeviceId: c.DeviceID, Generation: c.Generation, Desired: impairmentToProto(c.Desired),
				Reason: c.Reason, Actor: c.Actor, Redelivery: c.State == store.CommandSent,
			}}})
		}
		return o
	}}
}

// markSent records that cmds went out.
func (l *linkLoop) markSent(ctx context.Context, cmds []store.Command) outcome {
	for _, c := range cmds {
		if err := l.s.store.MarkSent(ctx, c.ID); err != nil {
			l.log.Warn("mark command sent", "command_id", c.ID, "err", err)
		}
		l.log.Info("command sent", "command_id", c.ID, "device_id", c.DeviceID, "generation", c.Generation, "desired", c.Desired)
	}
	return outcome{}
}

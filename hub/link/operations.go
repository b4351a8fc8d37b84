package link

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/operations/vault"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// Operations over the link (SPEC "Operations", issue 13). Delivery has the
// guarantees of commands: a NOTIFY hint and the periodic sweep
// (Config.CommandSweep) look for due operations; every delivery is a new
// attempt (store.MarkOperationSent, before the send), and progress for an
// older attempt is ignored; a RUNNING operation without progress goes out
// again after Config.Operations.ResendAfter, doubling up to MaxResendAfter
// while none comes (no tight retry), and every RUNNING one goes out again
// when the site reconnects. Only links whose hello announced
// operations.Capability get operations. At most
// Config.Operations.PerSiteLimit run at a site; the rest stay PENDING.

// Limits on OperationProgress; beyond them the message is refused
// (InvalidArgument) and the link ends, writing nothing.
const (
	// MaxOperationSteps is the most steps one progress may carry.
	MaxOperationSteps = 100
	// MaxStepTextBytes bounds a step's name and observed_state.
	MaxStepTextBytes = 255
	// MaxProgressTextBytes bounds a step message, error and failure_reason.
	MaxProgressTextBytes = 4096
	// MaxStepRequests is the most requests one step may carry.
	MaxStepRequests = 32
)

// checkStepRequests checks a step's requests against the limits above.
func checkStepRequests(f string, reqs []*ironlinkv1.StepRequest) error {
	if len(reqs) > MaxStepRequests {
		return invalid(f, f+".requests", grpcerr.ReasonOutOfRange, "%d requests, at most %d", len(reqs), MaxStepRequests)
	}
	for j, r := range reqs {
		g := fmt.Sprintf("%s.requests[%d]", f, j)
		for _, c := range []error{
			textcheck.Line(g+".method", r.GetMethod(), 16),
			textcheck.Line(g+".path", r.GetPath(), MaxStepTextBytes),
			textcheck.Text(g+".detail", r.GetDetail(), MaxProgressTextBytes),
			textcheck.Text(g+".error", r.GetError(), MaxProgressTextBytes),
		} {
			if c != nil {
				return grpcerr.FromCheck(c)
			}
		}
	}
	return nil
}

// Defaults of Config.Operations.
const (
	DefaultOperationsPerSite       = 5
	DefaultOperationResendAfter    = 60 * time.Second
	DefaultOperationMaxResendAfter = 10 * time.Minute
)

// FailureCredentialsUnavailable is the failure_reason of an ENROL the hub
// itself failed: the replica process that held its BMC credentials in
// memory is gone (package vault).
const FailureCredentialsUnavailable = "CredentialsUnavailable"

func (c *Config) operationDefaults() {
	defaultIfNotPositive(&c.Operations.PerSiteLimit, DefaultOperationsPerSite)
	defaultIfNotPositive(&c.Operations.ResendAfter, DefaultOperationResendAfter)
	defaultIfNotPositive(&c.Operations.MaxResendAfter, DefaultOperationMaxResendAfter)
	if c.Vault == nil {
		c.Vault = vault.New(c.Replica, 0)
	}
}

// Vault returns the credential vault this server delivers ENROLs from; the
// operation server of the same process must put them there.
func (s *Server) Vault() *vault.Vault { return s.cfg.Vault }

// pushOperations queues a look for due operations (resend: every RUNNING
// one, at link start) on links that offer operations.
func (l *linkLoop) pushOperations(resend bool) {
	if l.ops {
		l.writes.pushOnce(l.operationsTask(resend))
	}
}

// operationsTask sends the site's due operations: RUNNING ones due again,
// then PENDING ones while the site has free slots.
func (l *linkLoop) operationsTask(resend bool) task {
	return task{kind: "deliver operations", run: func(ctx context.Context) outcome {
		running, pending, free, err := l.s.store.DueOperations(ctx, l.site, l.epoch, l.s.cfg.Operations, resend, 200)
		if err != nil {
			if ctx.Err() == nil {
				l.log.Warn("load due operations", "err", err)
			}
			return outcome{}
		}
		var o outcome
		for _, op := range running {
			if m := l.deliverOperation(ctx, op); m != nil {
				o.send = append(o.send, m)
			}
		}
		for _, op := range pending {
			if free == 0 {
				break
			}
			if m := l.deliverOperation(ctx, op); m != nil {
				o.send = append(o.send, m)
				free--
			}
		}
		if n := len(pending); n > 0 && free == 0 {
			l.log.Debug("operations queued behind the site's concurrency limit", "limit", l.s.cfg.Operations.PerSiteLimit)
		}
		return o
	}}
}

// deliverOperation marks op sent (a new attempt) and returns the message
// to send, or nil: finished meanwhile, fenced, or an ENROL whose
// credentials this process does not hold (left for the holder, or failed
// when the holder is gone).
func (l *linkLoop) deliverOperation(ctx context.Context, op store.Operation) *ironlinkv1.ConnectResponse {
	var node *ironlinkv1.NodeSpec
	if op.Kind == store.KindEnrol {
		node = operations.NodeOf(op)
		if node == nil {
			l.failOperation(ctx, op, "the stored node spec cannot be read", "InvalidNodeSpec")
			return nil
		}
		node.DriverInfo = nil
		v := l.s.cfg.Vault
		info, ok := v.Get(op.ID)
		switch {
		case ok:
			node.DriverInfo = info
		case op.SecretHolder == "" || op.DeviceID != "":
			// No credentials were given, or the node exists: the satellite
			// takes it over by name without them.
		case len(op.SealedDriverInfo) == 0 && strings.HasPrefix(op.SecretHolder, vault.SealedHolderPrefix):
			// Sealed, but the value is gone while the enrolment is open
			// (the database trigger drops it only once the node exists or
			// the operation ended): nothing will bring it back.
			l.failOperation(ctx, op, fmt.Sprintf("the BMC credentials (driver_info) of this enrolment cannot be opened: %v: the stored value is missing; "+
				"start the enrolment again", vault.ErrBrokenSeal), FailureCredentialsUnavailable)
			return nil
		case len(op.SealedDriverInfo) > 0:
			sl := v.Sealer()
			if sl == nil {
				if time.Since(op.CreatedAt) <= v.TTL() {
					l.log.Debug("enrolment sealed with a key this replica lacks (--enrol-key-file): left for a replica that has it",
						"operation_id", op.ID, "holder", op.SecretHolder)
					return nil
				}
				l.failOperation(ctx, op, fmt.Sprintf("the BMC credentials (driver_info) of this enrolment are sealed with key %s, and the replica holding the link "+
					"has no --enrol-key-file: give every replica the same key, then start the enrolment again", strings.TrimPrefix(op.SecretHolder, vault.SealedHolderPrefix)),
					FailureCredentialsUnavailable)
				return nil
			}
			info, err := sl.Open(op.ID, op.SealedDriverInfo)
			if err != nil {
				l.failOperation(ctx, op, fmt.Sprintf("the BMC credentials (driver_info) of this enrolment cannot be opened: %v; "+
					"give every replica the same --enrol-key-file, then start the enrolment again", err), FailureCredentialsUnavailable)
				return nil
			}
			node.DriverInfo = info
		case op.SecretHolder == v.Holder() || v.SameReplica(op.SecretHolder) || time.Since(op.CreatedAt) > v.TTL():
			l.failOperation(ctx, op, fmt.Sprintf("the BMC credentials (driver_info) of this enrolment were kept only in the memory of hub replica process %s, "+
				"which restarted or dropped them (kept at most %s) before the node was created; start the enrolment again", op.SecretHolder, v.TTL()), FailureCredentialsUnavailable)
			return nil
		default:
			l.log.Debug("enrolment left for the replica holding its credentials", "operation_id", op.ID, "holder", op.SecretHolder)
			return nil
		}
	}
	redelivery := op.Attempts > 0 && op.SentAt != nil
	sent, ok, err := l.s.store.MarkOperationSent(ctx, l.site, l.epoch, op.ID)
	if err != nil {
		if ctx.Err() == nil {
			l.log.Warn("mark operation sent", "operation_id", op.ID, "err", err)
		}
		return nil
	}
	if !ok {
		return nil
	}
	l.log.Info("operation sent", "operation_id", op.ID, "kind", op.Kind, "device_id", op.DeviceID, "device_name", op.DeviceName,
		"attempt", sent.Attempts, "redelivery", redelivery, "cancel", sent.CancelRequested)
	return &ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Operation{Operation: &ironlinkv1.OperationRequest{
		OperationId: sent.ID, Attempt: sent.Attempts, Kind: operations.KindFromStore(sent.Kind), DeviceId: sent.DeviceID,
		Node: node, Params: operations.ParamsOf(sent), Cancel: sent.CancelRequested, Redelivery: redelivery,
		Traceparent: sent.TraceParent, Tracestate: sent.TraceState,
	}}}
}

func (l *linkLoop) failOperation(ctx context.Context, op store.Operation, msg, reason string) {
	if err := l.s.store.FailOperation(ctx, op.ID, msg, reason); err != nil {
		l.log.Warn("fail operation", "operation_id", op.ID, "err", err)
		return
	}
	l.s.cfg.Vault.Drop(op.ID)
	l.log.Warn("operation failed by the hub", "operation_id", op.ID, "kind", op.Kind, "failure_reason", reason, "error", msg)
}

// receiveProgress validates an OperationProgress and queues it.
func (l *linkLoop) receiveProgress(m *ironlinkv1.OperationProgress) error {
	if err := l.needScope(auth.ScopeDeviceUpdate, "report operation progress"); err != nil {
		return err
	}
	p, err := ToOperationProgress(m)
	if err != nil {
		l.log.Warn("operation progress refused", "err", err)
		return err
	}
	l.writes.push(l.progressTask(p))
	return nil
}

// ToOperationProgress validates m and returns it in store form. Errors:
// InvalidArgument naming the field.
func ToOperationProgress(m *ironlinkv1.OperationProgress) (store.OperationProgress, error) {
	where := "operation_progress"
	id, err := uuid.Parse(m.GetOperationId())
	if err != nil {
		return store.OperationProgress{}, invalid(where, where+".operation_id", grpcerr.ReasonNotUUID, "operation_id %s is not a UUID", textcheck.Quote(m.GetOperationId()))
	}
	if m.GetAttempt() < 1 {
		return store.OperationProgress{}, invalid(where, where+".attempt", grpcerr.ReasonOutOfRange, "attempt %d, want ≥ 1 (the attempt of the OperationRequest answered)", m.GetAttempt())
	}
	st := operations.StateToStore(m.GetState())
	if st == "" || st == store.OperationPending {
		return store.OperationProgress{}, invalid(where, where+".state", grpcerr.ReasonInvalidValue, "state %d: want RUNNING, SUCCEEDED, FAILED or CANCELLED", m.GetState())
	}
	var dev string
	if m.GetDeviceId() != "" {
		u, err := uuid.Parse(m.GetDeviceId())
		if err != nil {
			return store.OperationProgress{}, invalid(where, where+".device_id", grpcerr.ReasonNotUUID, "device_id %s is not a UUID", textcheck.Quote(m.GetDeviceId()))
		}
		dev = u.String()
	}
	if len(m.GetSteps()) > MaxOperationSteps {
		return store.OperationProgress{}, invalid(where, where+".steps", grpcerr.ReasonOutOfRange, "%d steps, at most %d", len(m.GetSteps()), MaxOperationSteps)
	}
	for i, s := range m.GetSteps() {
		f := fmt.Sprintf("%s.steps[%d]", where, i)
		for _, c := range []error{
			textcheck.Line(f+".name", s.GetName(), MaxStepTextBytes),
			textcheck.Line(f+".observed_state", s.GetObservedState(), MaxStepTextBytes),
			textcheck.Text(f+".message", s.GetMessage(), MaxProgressTextBytes),
		} {
			if c != nil {
				return store.OperationProgress{}, grpcerr.FromCheck(c)
			}
		}
		if err := checkStepRequests(f, s.GetRequests()); err != nil {
			return store.OperationProgress{}, err
		}
	}
	for _, c := range []error{
		textcheck.Line(where+".provision_state", m.GetProvisionState(), MaxStepTextBytes),
		textcheck.Text(where+".error", m.GetError(), MaxProgressTextBytes),
		textcheck.Line(where+".failure_reason", m.GetFailureReason(), MaxStepTextBytes),
		textcheck.Line(where+".server_id", m.GetServerId(), 64),
	} {
		if c != nil {
			return store.OperationProgress{}, grpcerr.FromCheck(c)
		}
	}
	steps, err := operations.MarshalSteps(m.GetSteps())
	if err != nil {
		return store.OperationProgress{}, invalid(where, where+".steps", grpcerr.ReasonInvalidValue, "%v", err)
	}
	return store.OperationProgress{OperationID: id.String(), Attempt: m.GetAttempt(), State: st, Steps: steps, DeviceID: dev,
		ProvisionState: m.GetProvisionState(), Error: m.GetError(), FailureReason: m.GetFailureReason(),
		ServerID: m.GetServerId(), CancelRefused: m.GetCancelRefused()}, nil
}

// progressTask records operation progress.
func (l *linkLoop) progressTask(p store.OperationProgress) task {
	return task{kind: "operation progress", run: func(ctx context.Context) outcome {
		res, err := l.s.store.RecordOperationProgress(ctx, l.site, p)
		if errors.Is(err, store.ErrOperationActive) { // never together with ErrNotFound
			l.log.Warn("progress ignored: the node it names already runs another operation", "operation_id", p.OperationID, "device_id", p.DeviceID)
			return outcome{}
		}
		if out, done := l.writeFailed(err, "operation progress", "progress for unknown operation ignored", "operation_id", p.OperationID); done {
			return out
		}
		if res.Ignored {
			l.log.Info("operation progress ignored", "operation_id", p.OperationID, "attempt", p.Attempt, "state", p.State, "why", res.Why)
			return outcome{}
		}
		if res.Operation.State.Final() {
			l.s.cfg.Vault.Drop(p.OperationID)
		}
		l.log.Info("operation progress", "operation_id", p.OperationID, "attempt", p.Attempt, "state", p.State,
			"provision_state", p.ProvisionState, "device_id", res.Operation.DeviceID, "error", p.Error,
			"failure_reason", p.FailureReason, "cancel_refused", p.CancelRefused)
		return outcome{}
	}}
}

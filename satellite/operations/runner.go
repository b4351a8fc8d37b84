package operations

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/logkey"
	"github.com/ironlink/ironlink/satellite/glance"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/site"
)

// Defaults of Config.PollInterval and Config.MaxConcurrent. satellite/app's
// Defaults table uses them (the values the flags show and Validate fills);
// New fills them too for a Config built without it, so each value is
// written once.
const (
	DefaultPollInterval  = 2 * time.Second
	DefaultMaxConcurrent = 8
)

// Config tunes a Runner; zero fields take the documented defaults.
type Config struct {
	// PollInterval is the wait between two passes while Ironic or Nova is
	// moving the node (default 2 s).
	PollInterval time.Duration
	// MaxConcurrent bounds the operations reconciled at once; the others
	// wait (default 8).
	MaxConcurrent int
	// Timeout ends an operation FAILED ("Timeout") that has not reached its
	// goal after this long in this process (default 2 h; Ironic's own
	// callback timeouts are 30 min).
	Timeout time.Duration
	// Retry bounds the retries of one call on 409 NodeLocked and
	// 502/503/504 (default: 10 attempts within 2 min, waits 1 s → 15 s).
	Retry openstack.RetryPolicy
	// NoValidHostWait is how long NOVA_CREATE waits before booting again
	// after a boot ended in "No valid host" without reaching the node
	// (default 20 s).
	NoValidHostWait time.Duration
	// FinishedTTL is how long a final progress is kept to answer a
	// redelivery without reading OpenStack again (default 1 h).
	FinishedTTL time.Duration
}

// Clients are the OpenStack clients of the operations credential.
type Clients struct {
	// Baremetal is Ironic, microversion negotiated (at least 1.65 for
	// lessee; satellite/openstack.Connect). Required.
	Baremetal *gophercloud.ServiceClient
	// Compute is Nova; nil on a site without Nova (NOVA_* then fail).
	Compute *gophercloud.ServiceClient
	// Image is Glance, used to resolve image names for NOVA_CREATE; may be
	// nil (image names are then passed to Nova as given).
	Image *gophercloud.ServiceClient
}

// Site is what a Runner works through: the satellite/site seams, backed by
// the operations credential's gophercloud clients ([New]) or a
// site.Fixture in tests ([NewOnSite]).
type Site struct {
	// Ironic is required.
	Ironic site.Ironic
	// Nova is nil (a nil interface) on a site without Nova: NOVA_*
	// operations then fail with NovaUnavailable.
	Nova site.Nova
	// Images resolves image names; nil passes them to Nova as given.
	Images site.Images
}

// Runner runs operations. Progress goes to the report function given to
// [New], which must not block for long (the link queues it). Safe for
// concurrent use.
type Runner struct {
	ironic site.Ironic
	nova   site.Nova   // nil without Nova
	images site.Images // nil without Glance
	log    *slog.Logger
	cfg    Config
	report func(*ironlinkv1.OperationProgress)
	sem    chan struct{}
	ctx    context.Context

	mu       sync.Mutex
	running  map[string]*run                          // by operation id
	busy     map[string]string                        // node UUID or "name:"+name → operation id
	finished map[string]*ironlinkv1.OperationProgress // by operation id
	doneAt   map[string]time.Time
	hwReader HardwareReader // nil until SetHardwareReader
	wg       sync.WaitGroup
}

// New returns a Runner using c, reporting progress through report. Runs
// started with [Runner.Handle] live until ctx ends (a satellite shutdown:
// the next process continues them where Ironic is).
func New(ctx context.Context, c Clients, cfg Config, report func(*ironlinkv1.OperationProgress), log *slog.Logger) *Runner {
	return NewOnSite(ctx, c.site(retryPolicy(cfg), log), cfg, report, log)
}

// retryPolicy is cfg.Retry or, unset, the default: 10 attempts within 2
// min, waits 1 s → 15 s, 60 s per attempt.
func retryPolicy(cfg Config) openstack.RetryPolicy {
	if cfg.Retry.MaxAttempts == 0 {
		return openstack.RetryPolicy{InitialInterval: time.Second, MaxInterval: 15 * time.Second,
			Budget: 2 * time.Minute, MaxAttempts: 10, AttemptTimeout: 60 * time.Second}
	}
	return cfg.Retry
}

// site wraps the operations credential's clients in the satellite/site
// seams, every call retried per rp (409 NodeLocked and 502/503/504).
func (c Clients) site(rp openstack.RetryPolicy, log *slog.Logger) Site {
	ic := ironic.New(c.Baremetal, log)
	ic.ReadRetry, ic.WriteRetry = rp, rp
	s := Site{Ironic: ic}
	if c.Compute != nil {
		s.Nova = nova.NewForOperations(c.Compute, rp, log)
	}
	if c.Image != nil {
		s.Images = glance.New(c.Image, rp, log)
	}
	return s
}

// NewOnSite is New over the seams of s (a site.Fixture in tests).
func NewOnSite(ctx context.Context, s Site, cfg Config, report func(*ironlinkv1.OperationProgress), log *slog.Logger) *Runner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Hour
	}
	if cfg.NoValidHostWait <= 0 {
		cfg.NoValidHostWait = 20 * time.Second
	}
	if cfg.FinishedTTL <= 0 {
		cfg.FinishedTTL = time.Hour
	}
	return &Runner{ironic: s.Ironic, nova: s.Nova, images: s.Images, log: log, cfg: cfg, report: report,
		sem: make(chan struct{}, cfg.MaxConcurrent), ctx: ctx,
		running: map[string]*run{}, busy: map[string]string{}, finished: map[string]*ironlinkv1.OperationProgress{}, doneAt: map[string]time.Time{}}
}

// Handle takes one OperationRequest from the hub and returns at once:
//
//   - a new operation starts (after [Validate]; a bad request is reported
//     FAILED/InvalidArgument without touching OpenStack), unless another
//     operation holds its node (FAILED/NodeBusy);
//   - a redelivery of a running operation makes it report its progress
//     again under the newer attempt; with cancel set it asks the run to
//     abort;
//   - a redelivery of a finished operation answers with its final
//     progress.
func (r *Runner) Handle(req *ironlinkv1.OperationRequest) {
	id := req.GetOperationId()
	r.mu.Lock()
	if run, ok := r.running[id]; ok {
		r.mu.Unlock()
		run.redeliver(req)
		return
	}
	if p, ok := r.finished[id]; ok {
		r.mu.Unlock()
		p = proto.Clone(p).(*ironlinkv1.OperationProgress)
		p.Attempt = max(p.GetAttempt(), req.GetAttempt())
		r.send(p)
		return
	}
	if err := Validate(req); err != nil {
		r.mu.Unlock()
		r.finish(id, &ironlinkv1.OperationProgress{OperationId: id, Attempt: req.GetAttempt(),
			State: ironlinkv1.OperationState_OPERATION_STATE_FAILED, Error: err.Error(), FailureReason: "InvalidArgument",
			DeviceId: req.GetDeviceId(), ObservedTime: timestamppb.Now()})
		return
	}
	key := nodeKey(req)
	if other, ok := r.busy[key]; ok {
		r.mu.Unlock()
		r.log.Warn("operation refused: its node runs another operation", "operation_id", id, "other_operation_id", other, logkey.DeviceID, req.GetDeviceId())
		r.send(&ironlinkv1.OperationProgress{OperationId: id, Attempt: req.GetAttempt(),
			State: ironlinkv1.OperationState_OPERATION_STATE_FAILED, FailureReason: "NodeBusy",
			Error: "the node is running operation " + other + "; one node runs one operation at a time", DeviceId: req.GetDeviceId(), ObservedTime: timestamppb.Now()})
		return
	}
	run := newRun(r, req)
	r.running[id] = run
	r.busy[key] = id
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		select {
		case r.sem <- struct{}{}:
		case <-r.ctx.Done():
			r.drop(id, key)
			return
		}
		defer func() { <-r.sem }()
		final := run.execute(r.ctx)
		if final == nil { // ctx ended: the next process continues
			r.drop(id, key)
			return
		}
		r.mu.Lock()
		delete(r.running, id)
		delete(r.busy, key)
		r.mu.Unlock()
		r.finish(id, final)
	}()
}

// Wait blocks until every run started so far has returned (after their
// context ended or they finished).
func (r *Runner) Wait() { r.wg.Wait() }

// Running returns the number of operations being reconciled or waiting for
// a slot.
func (r *Runner) Running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.running)
}

func (r *Runner) drop(id, key string) {
	r.mu.Lock()
	delete(r.running, id)
	delete(r.busy, key)
	r.mu.Unlock()
}

func (r *Runner) finish(id string, p *ironlinkv1.OperationProgress) {
	r.mu.Lock()
	now := time.Now()
	for k, t := range r.doneAt {
		if now.Sub(t) > r.cfg.FinishedTTL {
			delete(r.doneAt, k)
			delete(r.finished, k)
		}
	}
	r.finished[id] = p
	r.doneAt[id] = now
	r.mu.Unlock()
	r.log.Info("operation finished", "operation_id", id, logkey.DeviceID, p.GetDeviceId(), "state", p.GetState().String(),
		"failure_reason", p.GetFailureReason(), "error", p.GetError())
	r.send(p)
}

func (r *Runner) send(p *ironlinkv1.OperationProgress) {
	if r.report != nil {
		r.report(p)
	}
}

// nodeKey is the key of the node an operation works on.
func nodeKey(req *ironlinkv1.OperationRequest) string {
	if req.GetKind() == ironlinkv1.OperationKind_OPERATION_KIND_ENROL {
		return "name:" + req.GetNode().GetName()
	}
	return req.GetDeviceId()
}

// run is one operation being reconciled.
type run struct {
	r   *Runner
	log *slog.Logger

	mu             sync.Mutex
	req            *ironlinkv1.OperationRequest
	attempt        int32
	cancel         bool // a cancel was asked for and not yet answered
	steps          []*ironlinkv1.OperationStep
	deviceID       string
	provisionState string
	serverID       string
	wake           chan struct{}

	// set on the first pass of this process
	checked       bool
	portsDone     bool
	boots         int       // NOVA_CREATE: servers booted by this process
	serverDeletes int       // NOVA_CREATE: deletes of a server in ERROR retried after 5xx
	retryAt       time.Time // NOVA_CREATE: no boot before this
	flavor        *flavor   // NOVA_CREATE: resolved flavor
	imageID       string    // NOVA_CREATE: resolved image
	powerRequests int       // POWER_*, REBOOT: power requests sent for the current goal
	// SET_ and CLEAR_MAINTENANCE: the write was sent by this process
	maintenanceSent bool
}

func newRun(r *Runner, req *ironlinkv1.OperationRequest) *run {
	return &run{r: r, req: req, attempt: req.GetAttempt(), cancel: req.GetCancel(), deviceID: req.GetDeviceId(),
		wake: make(chan struct{}, 1),
		log:  r.log.With("operation_id", req.GetOperationId(), "kind", req.GetKind().String(), logkey.DeviceID, req.GetDeviceId())}
}

// redeliver records a newer attempt (and a cancel) and resends progress.
func (u *run) redeliver(req *ironlinkv1.OperationRequest) {
	u.mu.Lock()
	if req.GetAttempt() > u.attempt {
		u.attempt = req.GetAttempt()
	}
	if req.GetCancel() {
		u.cancel = true
	}
	u.mu.Unlock()
	select {
	case u.wake <- struct{}{}:
	default:
	}
	u.sendProgress(false)
}

func (u *run) cancelRequested() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.cancel
}

// progress builds the current progress (RUNNING) under the newest attempt.
func (u *run) progressLocked(state ironlinkv1.OperationState) *ironlinkv1.OperationProgress {
	steps := make([]*ironlinkv1.OperationStep, len(u.steps))
	for i, s := range u.steps {
		steps[i] = proto.Clone(s).(*ironlinkv1.OperationStep)
	}
	return &ironlinkv1.OperationProgress{OperationId: u.req.GetOperationId(), Attempt: u.attempt, State: state,
		Steps: steps, DeviceId: u.deviceID, ProvisionState: u.provisionState, ServerId: u.serverID, ObservedTime: timestamppb.Now()}
}

func (u *run) sendProgress(cancelRefused bool) {
	u.mu.Lock()
	p := u.progressLocked(ironlinkv1.OperationState_OPERATION_STATE_RUNNING)
	p.CancelRefused = cancelRefused
	u.mu.Unlock()
	u.r.send(p)
}

// serverStep is step for a Nova step: observed is the server's status,
// nodeState the node's Ironic provision state seen with it (progress's
// provision_state is always Ironic's: the hub checks the next operation's
// start state against it).
func (u *run) serverStep(name, serverStatus, nodeState, msg string) {
	u.stepStates(name, serverStatus, nodeState, msg)
}

// step records that the run is in step name, having observed Ironic's
// provision state, and sends progress when that changed anything.
func (u *run) step(name, observed, msg string) { u.stepStates(name, observed, observed, msg) }

func (u *run) stepStates(name, observed, provisionState, msg string) {
	u.mu.Lock()
	now := timestamppb.Now()
	if provisionState != "" {
		u.provisionState = provisionState
	}
	var cur *ironlinkv1.OperationStep
	if n := len(u.steps); n > 0 && u.steps[n-1].GetEndTime() == nil {
		cur = u.steps[n-1]
	}
	switch {
	case cur != nil && cur.GetName() == name:
		if cur.GetObservedState() == observed && (msg == "" || cur.GetMessage() == msg) {
			u.mu.Unlock()
			return
		}
		cur.ObservedState = observed
		if msg != "" {
			cur.Message = msg
		}
	default:
		if cur != nil {
			cur.EndTime = now
		}
		u.steps = append(u.steps, &ironlinkv1.OperationStep{Name: name, StartTime: now, ObservedState: observed, Message: msg, Attempt: u.attempt})
	}
	u.mu.Unlock()
	u.log.Info("operation step", "step", name, "observed_state", observed, "message", msg)
	u.sendProgress(false)
}

// final builds the final progress and closes the open step.
func (u *run) final(state ironlinkv1.OperationState, reason, errMsg string) *ironlinkv1.OperationProgress {
	u.mu.Lock()
	defer u.mu.Unlock()
	if n := len(u.steps); n > 0 && u.steps[n-1].GetEndTime() == nil {
		u.steps[n-1].EndTime = timestamppb.Now()
	}
	p := u.progressLocked(state)
	p.FailureReason, p.Error = reason, errMsg
	return p
}

// fail is a permanent failure with reason, as an error for helpers that
// return errors; stop turns it back into the site.Result.
func fail(reason, format string, args ...any) error {
	return site.Failed(reason, format, args...).Err()
}

// reasonCancelled marks the Result that ends a run CANCELLED.
const reasonCancelled = "Cancelled"

// cancelled is the Result of an abort Ironic accepted.
var cancelled = site.Result{State: site.StateFailed, Reason: reasonCancelled}

// retryNow is the Result of a pass that wrote: pass again at once.
var retryNow = site.RetryAfter(0, "")

// waiting is the Result of a pass that found Ironic or Nova moving the
// node: pass again after PollInterval.
func (u *run) waiting() site.Result { return site.RetryAfter(u.r.cfg.PollInterval, "") }

// stop ends the run with err: the Result it carries (fail), or FAILED
// NodeLocked or OpenStackError with err's text — the clients have already
// retried what was worth retrying within their budget.
func stop(err error) site.Result {
	if r, ok := site.AsResult(err); ok {
		return r
	}
	reason := "OpenStackError"
	if openstack.StatusCode(err) == 409 && ironic.IsNodeLocked(err) {
		reason = "NodeLocked"
	}
	return site.Failed(reason, "%s", err.Error())
}

// execute reconciles until the goal, a failure, a cancel or ctx's end (nil).
func (u *run) execute(ctx context.Context) *ironlinkv1.OperationProgress {
	deadline := time.Now().Add(u.r.cfg.Timeout)
	u.log.Info("operation started", "attempt", u.attempt, "redelivery", u.req.GetRedelivery())
	for {
		if ctx.Err() != nil {
			return nil
		}
		res := u.pass(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if res.Permanent() || res.IsDone() {
			u.unmark(ctx, res)
			if ctx.Err() != nil {
				return nil
			}
		}
		switch {
		case res.Permanent() && res.Reason == reasonCancelled:
			return u.final(ironlinkv1.OperationState_OPERATION_STATE_CANCELLED, "", "")
		case res.Permanent():
			return u.final(ironlinkv1.OperationState_OPERATION_STATE_FAILED, res.Reason, res.Message)
		case res.IsDone():
			return u.final(ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED, "", "")
		}
		if time.Now().After(deadline) {
			return u.final(ironlinkv1.OperationState_OPERATION_STATE_FAILED, "Timeout", "the operation did not reach its goal within "+u.r.cfg.Timeout.String())
		}
		if res.After <= 0 {
			continue
		}
		t := time.NewTimer(res.After)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		case <-u.wake:
			t.Stop()
		}
	}
}

package link

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/streamrecv"
)

// CommandHandler applies hub commands. HandleCommand may be called
// concurrently for different devices and must be idempotent: the hub resends
// a command whose result it did not get.
type CommandHandler interface {
	HandleCommand(ctx context.Context, c *ironlinkv1.Command) *ironlinkv1.CommandResult
}

// DesiredStateHandler, when the CommandHandler also implements it, receives
// the hub's desired impairment states (after every Welcome and after every
// resync request), converges OpenStack to them and returns the corrections
// it made, which the client reports to the hub. Calls never overlap; a
// newer DesiredStates waiting while one is handled replaces an older one.
type DesiredStateHandler interface {
	HandleDesiredStates(ctx context.Context, s *ironlinkv1.DesiredStates) []*ironlinkv1.DriftCorrection
}

// Defaults of Config. satellite/app's Defaults table uses them (the values
// the flags show and Validate fills); NewClient fills them too for a Config
// built without it (tests), so each value is written once.
const (
	DefaultHeartbeatInterval = 20 * time.Second
	DefaultMaxBackoff        = 30 * time.Second
	DefaultKeepaliveTime     = 30 * time.Second
	DefaultKeepaliveTimeout  = 10 * time.Second
	DefaultResyncInterval    = 15 * time.Minute
)

// Config configures a Client.
type Config struct {
	// Site is this satellite's site name.
	Site string
	// BootID identifies this process run (random per start).
	BootID string
	// Version is the satellite version sent in Hello.
	Version string
	// Capabilities, when set, returns the site's capabilities for each
	// Hello ("placement", "nova"; empty while OpenStack is not connected).
	Capabilities func() []string
	// HubAddr is the hub's host:port.
	HubAddr string
	// DialOptions carry transport credentials (TLS or insecure); required.
	DialOptions []grpc.DialOption
	// HeartbeatInterval between satellite heartbeats (default 20 s).
	HeartbeatInterval time.Duration
	// MinBackoff and MaxBackoff bound the reconnect delay (defaults 500 ms, 30 s);
	// each delay is drawn uniformly from [0, current] (full jitter).
	MinBackoff, MaxBackoff time.Duration
	// KeepaliveTime is the gRPC keepalive ping interval (default 30 s; must be
	// ≥ the hub's enforcement minimum of 10 s) and KeepaliveTimeout the wait
	// for its answer (default 10 s).
	KeepaliveTime, KeepaliveTimeout time.Duration
	// MaxConcurrentCommands bounds commands applied at once (default 8).
	MaxConcurrentCommands int
	// Applied, when set, lists the command generations applied so far (sent in Hello).
	Applied func() []*ironlinkv1.AppliedGeneration
	// ResyncInterval is how often the client asks the hub for the site's
	// desired states, which starts a resync (default 15 min).
	ResyncInterval time.Duration
	// SiteState, when set, holds the site conditions sent after every Welcome
	// and whenever they change.
	SiteState *SiteState
	// Operations, when set, receives the hub's OperationRequests.
	Operations OperationHandler
	// Health, when set, is the local health door's spool: its reports go
	// to a hub that takes them (health.go).
	Health HealthSpool
	// OnLinkState, when set, is called with true when a link is up (the
	// hub's Welcome arrived) and with false when it went down; it must not block.
	OnLinkState func(up bool)
}

// Client keeps the link to the hub.
type Client struct {
	cfg        Config
	outbox     *Outbox
	snap       SnapshotFunc
	handler    CommandHandler
	log        *slog.Logger
	inflightMu sync.Mutex
	inflight   map[string]bool         // command id/generation being applied
	recent     map[string]recentResult // command id/generation → result, for redeliveries
	outbound   chan *ironlinkv1.ConnectRequest
	desired    chan *ironlinkv1.DesiredStates
	sem        chan struct{}
	resyncNow  chan struct{}
	progress   *progressQueue
	rehello    chan struct{}
	// siteHeld is true while the site conditions wait for a due snapshot
	// (sendSite); only the session's sender reads and writes it.
	siteHeld bool
}

// NewClient returns a client that sends from outbox (snapshots via snap) and
// applies commands with handler.
func NewClient(cfg Config, outbox *Outbox, snap SnapshotFunc, handler CommandHandler, log *slog.Logger) *Client {
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 500 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.KeepaliveTime <= 0 {
		cfg.KeepaliveTime = DefaultKeepaliveTime
	}
	if cfg.KeepaliveTimeout <= 0 {
		cfg.KeepaliveTimeout = DefaultKeepaliveTimeout
	}
	if cfg.MaxConcurrentCommands <= 0 {
		cfg.MaxConcurrentCommands = 8
	}
	if cfg.ResyncInterval <= 0 {
		cfg.ResyncInterval = DefaultResyncInterval
	}
	return &Client{cfg: cfg, outbox: outbox, snap: snap, handler: handler, log: log,
		outbound: make(chan *ironlinkv1.ConnectRequest, 64), desired: make(chan *ironlinkv1.DesiredStates, 1),
		resyncNow: make(chan struct{}, 1), progress: newProgressQueue(), rehello: make(chan struct{}, 1),
		sem: make(chan struct{}, cfg.MaxConcurrentCommands), inflight: map[string]bool{}, recent: map[string]recentResult{}}
}

// Run keeps a link open until ctx ends, reconnecting with backoff. It
// returns nil when ctx ends, or an error when the hub address is unusable.
func (c *Client) Run(ctx context.Context) error {
	opts := append([]grpc.DialOption{
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: c.cfg.KeepaliveTime, Timeout: c.cfg.KeepaliveTimeout, PermitWithoutStream: true}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16 << 20)),
	}, c.cfg.DialOptions...)
	cc, err := grpc.NewClient(c.cfg.HubAddr, opts...)
	if err != nil {
		return fmt.Errorf("hub address %q: %w", c.cfg.HubAddr, err)
	}
	defer cc.Close()
	api := ironlinkv1.NewLinkServiceClient(cc)
	if h, ok := c.handler.(DesiredStateHandler); ok {
		go c.resyncWorker(ctx, h)
	}

	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval, bo.MaxInterval, bo.RandomizationFactor, bo.Multiplier = c.cfg.MinBackoff, c.cfg.MaxBackoff, 0, 2
	for {
		start := time.Now()
		err := c.session(ctx, api)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errRehello) {
			// Not a failure: a new Hello announces what changed, at once.
			c.log.Info("reconnecting to announce new capabilities", "capabilities", c.capabilities())
			continue
		}
		if time.Since(start) > time.Minute {
			bo.Reset() // a link that held for a while starts the backoff again
		}
		delay := time.Duration(rand.Int64N(int64(bo.NextBackOff()) + 1)) // full jitter
		c.log.Warn("link down; reconnecting", "err", err, "in", delay.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
}

// errRehello ends a session so that the next Hello announces changed
// capabilities (Rehello); the link reconnects at once, without backoff.
var errRehello = errors.New("capabilities changed: reconnecting to announce them")

func (c *Client) capabilities() []string {
	if c.cfg.Capabilities == nil {
		return nil
	}
	return c.cfg.Capabilities()
}

// RequestResync asks the hub for the site's desired states now (as the
// resync ticker does), which starts a resync; it never blocks, and a request
// made while the link is down is sent when it comes up.
func (c *Client) RequestResync() {
	select {
	case c.resyncNow <- struct{}{}:
	default:
	}
}

// session runs one link from Hello until it fails.
func (c *Client) session(ctx context.Context, api ironlinkv1.LinkServiceClient) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, w, announced, err := c.handshake(ctx, api)
	if err != nil {
		return err
	}
	c.outbox.Restart(w.GetLastCommittedSequence(), w.GetLastCommittedBootId() == c.cfg.BootID)
	c.log.Info("link up", "replica", w.GetReplica(), "epoch", w.GetEpoch(), "hub_last_sequence", w.GetLastCommittedSequence())
	if c.cfg.OnLinkState != nil {
		c.cfg.OnLinkState(true)
		defer c.cfg.OnLinkState(false)
	}
	msgs, recvErr := streamrecv.Start(ctx, stream.Recv)
	every := c.cfg.HeartbeatInterval
	if hub := time.Duration(w.GetHeartbeatIntervalSeconds()) * time.Second; hub > 0 && hub < every {
		every = hub // the hub expects heartbeats at least this often
	}
	if err := c.sendBacklog(stream); err != nil {
		return err
	}
	var healthWake <-chan struct{}
	if c.healthOn(w) {
		defer c.cfg.Health.LinkDown()
		if err := c.sendHealth(stream); err != nil {
			return err
		}
		healthWake = c.cfg.Health.Wake()
	}
	return c.loop(ctx, stream, msgs, recvErr, linkTimers{every: every, health: healthWake}, announced)
}

// handshake opens the stream, sends Hello (with the current capabilities,
// the last sequence sent and the applied generations) and waits for the
// hub's Welcome. It returns the capabilities the Hello announced.
func (c *Client) handshake(ctx context.Context, api ironlinkv1.LinkServiceClient) (ironlinkv1.LinkService_ConnectClient, *ironlinkv1.Welcome, []string, error) {
	select { // this Hello carries the current capabilities
	case <-c.rehello:
	default:
	}
	stream, err := api.Connect(ctx)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open stream: %w", err)
	}
	_, lastSent := c.outbox.Pending()
	// A Rehello that raced this Hello (the capability changed after the
	// drain above but before this read) needs no second link: the loop
	// ignores it when the capabilities are still the announced ones.
	announced := c.capabilities()
	if err := stream.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Hello{Hello: &ironlinkv1.Hello{
		Site: c.cfg.Site, BootId: c.cfg.BootID, Version: c.cfg.Version, Capabilities: announced,
		LastSequenceSent: lastSent, AppliedGenerations: c.applied(),
	}}}); err != nil {
		return nil, nil, nil, fmt.Errorf("send hello: %w", err)
	}
	first, err := stream.Recv()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("await welcome: %w", err)
	}
	w := first.GetWelcome()
	if w == nil {
		return nil, nil, nil, errors.New("hub did not answer hello with a welcome")
	}
	return stream, w, announced, nil
}

// sendBatches sends the outbox's pending batches (a snapshot first when one
// is due).
func (c *Client) sendBatches(stream ironlinkv1.LinkService_ConnectClient) error {
	for _, b := range c.outbox.Take(c.snap) {
		if err := stream.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Batch{Batch: b}}); err != nil {
			return fmt.Errorf("send batch %d: %w", b.GetSequence(), err)
		}
		c.log.Debug("batch sent", "sequence", b.GetSequence(), "devices", len(b.GetDevices()), "snapshot", b.GetSnapshot() != nil)
	}
	return nil
}

// sendBacklog sends, once the link is up, what waited for it: the pending
// batches, the operations' progress and the full set of site conditions.
func (c *Client) sendBacklog(stream ironlinkv1.LinkService_ConnectClient) error {
	if err := c.sendBatches(stream); err != nil {
		return err
	}
	if err := c.flushProgress(stream.Send); err != nil {
		return fmt.Errorf("send operation progress: %w", err)
	}
	if c.cfg.SiteState == nil {
		return nil
	}
	select { // the full set goes now: a pending change signal is covered
	case <-c.cfg.SiteState.changed:
	default:
	}
	if err := c.sendSite(stream); err != nil {
		return fmt.Errorf("send site conditions: %w", err)
	}
	return nil
}

// sendSite sends the site conditions, when there are. A set that carries
// a successful poll mark (InventoryPolled=True) waits while a snapshot is
// due and not yet sent (siteHeld) and goes right after it: the mark tells
// the hub it has everything the poll saw (docs/reference/policy.md "Fresh
// evidence"), and sent before the snapshot that carries that poll (a new
// process's first snapshot waits for the hub's desired states, up to
// satellite/agent's DefaultDesiredStatesWait) it let the hub act on the
// devices' conditions from before the link came up. A set without that mark (no poll yet, or
// a failed one) goes at once: it asserts nothing about the devices.
func (c *Client) sendSite(stream ironlinkv1.LinkService_ConnectClient) error {
	if p, ok := c.cfg.SiteState.Get(condition.InventoryPolled); ok && p.Status == condition.True && c.outbox.SnapshotDue() {
		c.siteHeld = true
		return nil
	}
	c.siteHeld = false
	if m := c.cfg.SiteState.message(); m != nil {
		return stream.Send(m)
	}
	return nil
}

// linkTimers are the session's periodic and signalled sends: heartbeats
// every, and health reports when health signals (nil: none).
type linkTimers struct {
	every  time.Duration
	health <-chan struct{}
}

// loop is the session's one sender: it sends batches, progress, site
// conditions, results, health reports, resync requests and heartbeats (lt) as they come
// due, and handles the hub's messages, until the stream fails, ctx ends or
// a new Hello is needed (errRehello: the capabilities differ from the
// announced ones).
func (c *Client) loop(ctx context.Context, stream ironlinkv1.LinkService_ConnectClient, msgs <-chan *ironlinkv1.ConnectResponse, recvErr <-chan error,
	lt linkTimers, announced []string) error {
	hb := time.NewTicker(lt.every)
	defer hb.Stop()
	resync := time.NewTicker(c.cfg.ResyncInterval)
	defer resync.Stop()
	var siteChanged <-chan struct{}
	if c.cfg.SiteState != nil {
		siteChanged = c.cfg.SiteState.changed
	}
	desiredStatesRequest := func() *ironlinkv1.ConnectRequest {
		return &ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_DesiredStatesRequest{DesiredStatesRequest: &ironlinkv1.DesiredStatesRequest{}}}
	}
	for {
		var err error
		select {
		case <-ctx.Done():
			_ = stream.CloseSend()
			return ctx.Err()
		case err = <-recvErr:
			if errors.Is(err, io.EOF) {
				return errors.New("hub closed the link")
			}
			return err
		case <-c.outbox.Wake():
			if err = c.sendBatches(stream); err == nil && c.siteHeld {
				err = c.sendSite(stream) // the snapshot they waited for went
			}
		case <-c.progress.wake:
			err = c.flushProgress(stream.Send)
		case <-c.rehello:
			if slices.Equal(c.capabilities(), announced) {
				break // this link's Hello already said so
			}
			_ = stream.CloseSend()
			return errRehello
		case <-siteChanged:
			// Batches queued before the change go first: a poll's deltas
			// reach the hub before its InventoryPolled mark
			// (docs/design/link.md "Site conditions").
			if err = c.sendBatches(stream); err == nil {
				err = c.sendSite(stream)
			}
		case m := <-c.outbound:
			err = stream.Send(m)
		case <-lt.health:
			err = c.sendHealth(stream)
		case <-c.resyncNow:
			err = stream.Send(desiredStatesRequest())
		case <-resync.C:
			err = stream.Send(desiredStatesRequest())
		case <-hb.C:
			err = stream.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Heartbeat{Heartbeat: &ironlinkv1.Heartbeat{SentTime: timestamppb.Now()}}})
		case m := <-msgs:
			c.handle(ctx, m)
		}
		if err != nil {
			return err
		}
	}
}

// handle acts on one message from the hub: an ack, a command, desired
// states or an operation (heartbeats need nothing).
func (c *Client) handle(ctx context.Context, m *ironlinkv1.ConnectResponse) {
	switch msg := m.GetMsg().(type) {
	case *ironlinkv1.ConnectResponse_Ack:
		c.outbox.Ack(msg.Ack.GetSequence())
	case *ironlinkv1.ConnectResponse_Command:
		c.dispatch(ctx, msg.Command)
	case *ironlinkv1.ConnectResponse_DesiredStates:
		c.offerDesired(msg.DesiredStates)
	case *ironlinkv1.ConnectResponse_Operation:
		if c.cfg.Operations == nil {
			c.log.Warn("operation from the hub, but this satellite runs no operations; ignored", "operation_id", msg.Operation.GetOperationId())
		} else {
			c.cfg.Operations.HandleOperation(msg.Operation)
		}
	case *ironlinkv1.ConnectResponse_HealthResult:
		if c.cfg.Health != nil {
			c.cfg.Health.Result(msg.HealthResult)
		}
	case *ironlinkv1.ConnectResponse_Heartbeat:
	default:
		c.log.Warn("unexpected message from hub", "type", fmt.Sprintf("%T", msg))
	}
}

func (c *Client) applied() []*ironlinkv1.AppliedGeneration {
	if c.cfg.Applied == nil {
		return nil
	}
	return c.cfg.Applied()
}

// dispatch applies a command in its own goroutine (bounded by
// MaxConcurrentCommands) and queues its result for the link.
func (c *Client) dispatch(ctx context.Context, cmd *ironlinkv1.Command) {
	// The hub resends a command that got no result; while it is still being
	// applied, the resend is dropped (its result follows when done), so a
	// slow apply is never queued twice behind itself.
	key := fmt.Sprintf("%s/%d", cmd.GetCommandId(), cmd.GetGeneration())
	c.inflightMu.Lock()
	if c.inflight[key] {
		c.inflightMu.Unlock()
		c.log.Info("command resent while still being applied; ignored", "command_id", cmd.GetCommandId(), "generation", cmd.GetGeneration())
		return
	}
	if r, ok := c.recent[key]; ok && cmd.GetRedelivery() && time.Since(r.at) < recentResultTTL {
		c.inflightMu.Unlock()
		c.log.Info("command redelivered after it was applied; answering with its result", "command_id", cmd.GetCommandId(), "generation", cmd.GetGeneration())
		c.enqueue(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_CommandResult{CommandResult: r.res}},
			"command result dropped: no link for a minute; the hub will resend the command")
		return
	}
	c.inflight[key] = true
	c.inflightMu.Unlock()
	c.log.Info("command received", "command_id", cmd.GetCommandId(), "device_id", cmd.GetDeviceId(),
		"generation", cmd.GetGeneration(), "desired", cmd.GetDesired(), "actor", cmd.GetActor())
	go func() {
		defer func() {
			c.inflightMu.Lock()
			delete(c.inflight, key)
			c.inflightMu.Unlock()
		}()
		select {
		case c.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-c.sem }()
		// The result outlives this link: it is sent on the next one if need be.
		actx, span := startApplySpan(context.WithoutCancel(ctx), cmd)
		defer span.End()
		r := c.handler.HandleCommand(actx, cmd)
		if !r.GetSuccess() {
			span.SetStatus(codes.Error, r.GetError())
		}
		span.SetAttributes(attribute.Bool("ironlink.success", r.GetSuccess()), attribute.String("ironlink.failure_reason", r.GetFailureReason()))
		c.remember(key, r)
		c.enqueue(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_CommandResult{CommandResult: r}},
			"command result dropped: no link for a minute; the hub will resend the command")
		span.AddEvent("result queued for the hub")
	}()
}

// tracerName names the tracer of the link's spans, taken from the global
// provider at each span (a no-op one unless tracing is on).
const tracerName = "github.com/ironlink/ironlink/satellite/link"

// startApplySpan starts the "apply command" span of cmd: a child of the W3C
// trace context the hub sent with it (Command.traceparent, tracestate: the
// hub's delivery, itself a child of the operator's call), so the OpenStack
// requests made under the returned ctx and the queued result join the
// operator's trace. Without a valid trace context it is a child of ctx.
func startApplySpan(ctx context.Context, cmd *ironlinkv1.Command) (context.Context, trace.Span) {
	if cmd.GetTraceparent() != "" {
		carrier := propagation.MapCarrier{"traceparent": cmd.GetTraceparent()}
		if cmd.GetTracestate() != "" {
			carrier["tracestate"] = cmd.GetTracestate()
		}
		ctx = propagation.TraceContext{}.Extract(ctx, carrier)
	}
	return otel.Tracer(tracerName).Start(ctx, "apply command", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("ironlink.command_id", cmd.GetCommandId()), attribute.String("ironlink.device_id", cmd.GetDeviceId()),
		attribute.Int64("ironlink.generation", cmd.GetGeneration()), attribute.String("ironlink.desired", cmd.GetDesired().String()),
		attribute.Bool("ironlink.redelivery", cmd.GetRedelivery())))
}

// recentResultTTL is how long a command's result is kept to answer a
// redelivery of it without applying it again.
const recentResultTTL = 10 * time.Minute

type recentResult struct {
	res *ironlinkv1.CommandResult
	at  time.Time
}

// remember keeps r for redeliveries of key, dropping expired entries (the
// map stays small: one entry per command applied in the last TTL).
func (c *Client) remember(key string, r *ironlinkv1.CommandResult) {
	c.inflightMu.Lock()
	defer c.inflightMu.Unlock()
	now := time.Now()
	for k, v := range c.recent {
		if now.Sub(v.at) > recentResultTTL {
			delete(c.recent, k)
		}
	}
	c.recent[key] = recentResult{res: r, at: now}
}

// enqueue queues m for the current or next link, waiting at most a minute.
func (c *Client) enqueue(m *ironlinkv1.ConnectRequest, dropped string) {
	select {
	case c.outbound <- m:
	case <-time.After(time.Minute):
		c.log.Warn(dropped)
	}
}

// offerDesired hands states to the resync worker, replacing any older set
// still waiting.
func (c *Client) offerDesired(s *ironlinkv1.DesiredStates) {
	for {
		select {
		case c.desired <- s:
			return
		default:
		}
		select {
		case <-c.desired:
		default:
		}
	}
}

// resyncWorker converges OpenStack to each DesiredStates in turn and reports
// the corrections.
func (c *Client) resyncWorker(ctx context.Context, h DesiredStateHandler) {
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-c.desired:
			for _, corr := range h.HandleDesiredStates(ctx, s) {
				c.enqueue(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_DriftCorrection{DriftCorrection: corr}},
					"drift correction report dropped: no link for a minute")
			}
		}
	}
}

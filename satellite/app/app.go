// Package app wires the satellite together: OpenStack clients from
// clouds.yaml, the Ironic and Placement clients, the polling agent and the
// link to the hub. cmd/ironlink-satellite only fills an [Options] from its
// flags and environment, validates it into a [Config] and calls [Run];
// config.go holds the three.
package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/reporterlimit"
	"github.com/ironlink/ironlink/internal/telemetry"
	"github.com/ironlink/ironlink/internal/version"
	"github.com/ironlink/ironlink/satellite/agent"
	"github.com/ironlink/ironlink/satellite/healthdoor"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/link"
	"github.com/ironlink/ironlink/satellite/metrics"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/operations"
	"github.com/ironlink/ironlink/satellite/placement"
)

// errNotValidated is Run's answer to a Config not made by Options.Validate.
var errNotValidated = errors.New("app: the Config was not made by Options.Validate (or it reported an error)")

// Run opens the hub link, connects to OpenStack (retrying with backoff while
// Keystone or the services are unreachable or refuse the credential, which
// the link reports as the site condition OpenStackAuthenticated), then polls,
// sweeps and keeps the link until ctx ends. cfg must come from a successful
// [Options.Validate].
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if !cfg.valid {
		return errNotValidated
	}
	// The metrics port is taken first: a port in use is a start-up error
	// naming the flag, before anything talks to OpenStack.
	var metricsLn net.Listener
	if cfg.MetricsAddr != "" {
		var err error
		if metricsLn, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			return fmt.Errorf("--metrics-addr %s (IRONLINK_METRICS_ADDR): %w", cfg.MetricsAddr, err)
		}
		defer metricsLn.Close()
	}
	var doorLn net.Listener
	if cfg.Health.Socket != "" {
		var err error
		if doorLn, err = healthdoor.Listen(cfg.Health.Socket); err != nil {
			return fmt.Errorf("--health-socket (IRONLINK_HEALTH_SOCKET): %w", err)
		}
		defer doorLn.Close()
	}
	s, err := newSatellite(cfg, log)
	if err != nil {
		return err
	}
	defer s.flushTraces()
	s.client = s.newLinkClient(doorLn != nil)
	return s.run(ctx, metricsLn, doorLn)
}

// satellite is one satellite's parts, built by newSatellite and run by run.
type satellite struct {
	cfg         Config
	log         *slog.Logger
	m           *metrics.Satellite
	site        *link.SiteState
	guard       *openstack.AuthGuard
	openStack   openstack.Config // cfg.OpenStack with the auth guard and tracing transport
	agentCfg    agent.Config     // cfg.Agent with the observer, resync request and condition settings
	dial        []grpc.DialOption
	flushTraces func()
	ready       *deferred
	outbox      *link.Outbox
	client      *link.Client
	door        *healthdoor.Server // nil without --health-socket

	// firstAttempt closes after the first attempt to reach OpenStack,
	// whatever its outcome, or after linkWait: the link comes up then, so
	// a refused credential reaches the hub.
	firstAttempt chan struct{}
	firstOnce    sync.Once
}

// newSatellite reads the identity and the state file and builds the
// metrics, the site conditions, the Keystone auth guard and tracing; it
// contacts nothing.
func newSatellite(cfg Config, log *slog.Logger) (*satellite, error) {
	dial, err := cfg.Identity.dialOptions()
	if err != nil {
		return nil, err
	}
	applied, err := agent.ReadAppliedGenerations(cfg.Agent.StatePath)
	if err != nil {
		return nil, err
	}
	s := &satellite{cfg: cfg, m: metrics.New(), openStack: cfg.OpenStack, agentCfg: cfg.Agent, outbox: link.NewOutbox(),
		ready: &deferred{ready: make(chan struct{}), applied: applied}, firstAttempt: make(chan struct{})}
	s.site = link.NewSiteState(s.m.SiteCondition)
	s.guard = openstack.NewAuthGuard(log.With("component", "keystone"))
	s.guard.InitialInterval = cfg.AuthBackoff
	s.guard.OnChange = func(st openstack.AuthState) {
		s.site.Set(condition.Condition{Type: condition.OpenStackAuthenticated, Status: condition.Status(st.Status), Reason: st.Reason, Message: st.Message})
	}
	s.guard.OnTokenRequest = func(err error) { s.m.TokenRequest(err, openstack.IsAuthError(err)) }
	s.openStack.AuthGuard = s.guard
	// Every site condition is known from the first message on; the agent
	// replaces this one once OpenStack answers.
	s.site.Set(condition.Condition{Type: condition.OrphanDetection, Status: condition.Unknown, Reason: agent.ReasonNotConnected,
		Message: "not connected to OpenStack yet: whether the site has Nova is not known"})
	s.site.Set(tlsVerification(cfg.OpenStack, log))
	s.log = slog.New(telemetry.LogHandler(log.Handler())) // trace ids in log lines
	traceDial, wrap, flush, err := setupTracing(s.log, s.m.Transport)
	if err != nil {
		return nil, err
	}
	s.flushTraces = flush
	s.openStack.WrapTransport = wrap
	s.dial = append(dial, traceDial...)
	s.m.SetReadiness(metrics.ReadyConfig{PollInterval: cfg.Agent.PollInterval})
	s.agentCfg.Observer = s.m
	return s, nil
}

// Reasons of the OpenStackTLSVerified site condition.
const (
	ReasonTLSVerified       = "Verified"
	ReasonTLSVerifyDisabled = "VerifyDisabled"
	ReasonTLSNotChecked     = "NotChecked"
)

// tlsVerification is the OpenStackTLSVerified site condition of cfg's
// clouds.yaml (openstack.Check, no request sent): False/VerifyDisabled
// (and a warning on log) when verify: false was let through by
// --openstack-insecure-skip-verify, True/Verified otherwise, and
// Unknown/NotChecked when clouds.yaml does not pass the check (Connect then
// reports it as OpenStackAuthenticated False/ConfigInvalid).
func tlsVerification(cfg openstack.Config, log *slog.Logger) condition.Condition {
	c := condition.Condition{Type: condition.OpenStackTLSVerified}
	checked, err := openstack.Check(cfg)
	switch {
	case err != nil:
		c.Status, c.Reason, c.Message = condition.Unknown, ReasonTLSNotChecked, "clouds.yaml did not pass its check: see OpenStackAuthenticated"
	case checked.InsecureTLS:
		c.Status, c.Reason, c.Message = condition.False, ReasonTLSVerifyDisabled,
			"clouds.yaml says verify: false and --openstack-insecure-skip-verify allows it: OpenStack's TLS certificates are NOT verified"
		log.Warn("TLS certificate verification towards OpenStack is OFF (clouds.yaml verify: false, --openstack-insecure-skip-verify)", "cloud", cfg.Cloud)
	default:
		c.Status, c.Reason, c.Message = condition.True, ReasonTLSVerified, "OpenStack's TLS certificates are verified"
	}
	return c
}

// newLinkClient builds the link to the hub; until the agent exists,
// s.ready answers for it (commands refused, desired states held).
func (s *satellite) newLinkClient(door bool) *link.Client {
	var boot [8]byte
	_, _ = rand.Read(boot[:])
	lc := s.cfg.Link
	lc.Site, lc.BootID, lc.Version, lc.HubAddr = s.cfg.Site, hex.EncodeToString(boot[:]), version.Version, s.cfg.HubAddr
	lc.DialOptions = append(lc.DialOptions, s.dial...)
	lc.Applied = s.ready.AppliedGenerations
	lc.SiteState = s.site
	lc.OnLinkState = s.m.LinkState
	s.m.SetOutbox(func() int { n, _ := s.outbox.Pending(); return n })
	lc.Capabilities = s.ready.Capabilities
	lc.Operations = s.ready
	if door {
		hm := healthdoor.NewMetrics(s.m.Registry)
		spool := healthdoor.NewSpool(s.cfg.Health.SpoolEvents, hm)
		lc.Health = spool
		s.door = healthdoor.NewServer(spool, s.cfg.Health.Wait, hm, s.log.With("component", "healthdoor"))
		s.door.SetReporterLimit(reporterlimit.New(s.cfg.Health.ReporterRate, s.cfg.Health.ReporterBurst))
	}
	client := link.NewClient(lc, s.outbox, s.ready.Snapshot, s.ready, s.log.With("component", "link"))
	s.agentCfg.RequestResync = client.RequestResync
	s.agentCfg.DesiredStatesWait = agent.DefaultDesiredStatesWait
	return client
}

// run serves metrics, keeps the link (from the first OpenStack attempt
// on), tells systemd, and connects to OpenStack and runs the agent, until
// ctx ends or one of them fails.
func (s *satellite) run(ctx context.Context, metricsLn, doorLn net.Listener) error {
	g, gctx := errgroup.WithContext(ctx)
	if metricsLn != nil {
		g.Go(func() error { return s.m.ServeListener(gctx, metricsLn) })
	}
	if doorLn != nil {
		g.Go(func() error { return s.door.Serve(gctx, doorLn) })
	}
	g.Go(func() error {
		select {
		case <-s.firstAttempt:
		case <-gctx.Done():
			return nil
		}
		return s.client.Run(gctx)
	})
	g.Go(func() error { notifySystemd(gctx, s.m.Ready, s.log.With("component", "systemd")); return nil })
	g.Go(func() error {
		// Bring the link up anyway if the first attempt hangs (Keystone
		// black-holed): the hub should see the site and why it is stuck.
		go func() {
			select {
			case <-time.After(linkWait):
				s.firstAttemptDone()
			case <-gctx.Done():
			}
		}()
		return s.connectAndRunAgent(gctx)
	})
	return g.Wait()
}

// firstAttemptDone lets the link come up (once).
func (s *satellite) firstAttemptDone() { s.firstOnce.Do(func() { close(s.firstAttempt) }) }

// connectAndRunAgent connects to OpenStack, builds the agent over its
// clients, starts operations when configured and runs the agent until ctx
// ends. An OpenStack configuration that cannot work is logged and waited
// out (nil), not retried.
func (s *satellite) connectAndRunAgent(ctx context.Context) error {
	clients, err := s.connectOpenStack(ctx)
	if err != nil || clients == nil {
		return err
	}
	ag, err := s.newAgent(clients)
	if err != nil {
		return err
	}
	s.firstAttemptDone()
	if s.cfg.OperationsCloud != "" {
		go s.startOperations(ctx, s.log.With("component", "operations"))
	}
	ag.Run(ctx)
	return nil
}

// connectOpenStack connects to OpenStack, retrying with backoff (the auth
// guard holds back token requests after a refusal). It returns nil clients
// and no error when ctx ends, and after ctx ends when the configuration
// cannot work (the guard reported it as OpenStackAuthenticated=False/
// ConfigInvalid and the link stays up so the hub shows why).
func (s *satellite) connectOpenStack(ctx context.Context) (*openstack.Clients, error) {
	log := s.log
	clients, err := backoff.Retry(ctx, func() (*openstack.Clients, error) {
		// After a failed token request the guard decides when the
		// next one may go (--auth-backoff, doubling).
		if err := s.guard.Wait(ctx); err != nil {
			return nil, backoff.Permanent(err)
		}
		c, err := openstack.Connect(ctx, s.openStack, log)
		if errors.Is(err, openstack.ErrConfig) {
			return nil, backoff.Permanent(err) // retrying cannot fix a configuration error
		}
		if err != nil {
			log.Warn("cannot reach OpenStack yet; retrying", "err", err)
			s.firstAttemptDone()
		}
		return c, err
	}, backoff.WithBackOff(connectBackoff(s.cfg.AuthBackoff)), backoff.WithMaxElapsedTime(0))
	switch {
	case err == nil:
		return clients, nil
	case ctx.Err() != nil:
		return nil, nil
	case errors.Is(err, openstack.ErrConfig):
		// clouds.yaml cannot work: nothing is retried (SPEC: never a crash
		// loop). A fixed file needs a restart.
		log.Error("OpenStack configuration invalid: not connecting; fix clouds.yaml and restart the satellite", "err", err)
		s.firstAttemptDone()
		<-ctx.Done()
		return nil, nil
	}
	return nil, fmt.Errorf("connect to OpenStack: %w", err)
}

// newAgent builds the agent over the connected clients (Placement and Nova
// when the site has them), loads its state and hands it to the link.
func (s *satellite) newAgent(clients *openstack.Clients) (*agent.Agent, error) {
	log := s.log
	log.Info("OpenStack connected", "ironic_microversion", clients.IronicVersion,
		"placement_microversion", clients.PlacementVersion, "standalone", clients.Standalone(), "nova", clients.Compute != nil)
	eps := map[string]string{"baremetal": clients.Baremetal.Endpoint}
	cl := agent.Clients{Ironic: ironic.New(clients.Baremetal, log.With("component", "ironic"))}
	var caps []string
	if !clients.Standalone() {
		cl.Placement = placement.New(clients.Placement, log.With("component", "placement"))
		eps["placement"] = clients.Placement.Endpoint
		caps = append(caps, "placement")
	}
	if clients.Compute != nil {
		cl.Nova = nova.New(clients.Compute, log.With("component", "nova"))
		eps["compute"] = clients.Compute.Endpoint
		caps = append(caps, "nova")
	}
	s.m.SetEndpoints(eps)
	ac := s.agentCfg
	ac.Conditions.Standalone = clients.Standalone()
	ag := agent.New(ac, cl, s.outbox, s.site, log.With("component", "agent"))
	if err := ag.LoadState(); err != nil {
		return nil, err
	}
	s.m.SetStats(func() metrics.Stats {
		st := ag.Stats()
		return metrics.Stats{Polls: st.Polls, FailedPolls: st.FailedPolls, Sweeps: st.Sweeps, FailedSweeps: st.FailedSweeps,
			Resyncs: st.Resyncs, DriftCorrections: st.DriftCorrections, InstanceMismatches: st.InstanceMismatches}
	})
	s.ready.set(ag, caps)
	return ag, nil
}

// startOperations connects with the operations credential (retrying with
// backoff while it fails) and then runs operations: the runner is handed to
// the link and "operations" joins the capabilities, announced by a fresh
// Hello.
func (s *satellite) startOperations(ctx context.Context, log *slog.Logger) {
	cfg, ready, client := s.cfg, s.ready, s.client
	oc := s.openStack // with the tracing transport, not the observer's auth guard
	oc.Cloud, oc.AuthGuard = cfg.OperationsCloud, nil
	clients, err := backoff.Retry(ctx, func() (operations.Clients, error) {
		c, _, err := operations.Connect(ctx, oc, log)
		if errors.Is(err, openstack.ErrConfig) {
			return c, backoff.Permanent(err)
		}
		if err != nil {
			log.Warn("operations credential does not work yet; no operations capability; retrying", "cloud", oc.Cloud, "err", err)
		}
		return c, err
	}, backoff.WithBackOff(connectBackoff(cfg.AuthBackoff)), backoff.WithMaxElapsedTime(0))
	if err != nil {
		if ctx.Err() == nil {
			log.Error("operations credential unusable: no operations capability; fix clouds.yaml and restart", "cloud", oc.Cloud, "err", err)
		}
		return
	}
	// A finished operation changed the node (or created it): list at once,
	// so the hub knows it by name and by its new state without waiting a
	// poll interval (the next operation's start-state guard reads it).
	send := func(p *ironlinkv1.OperationProgress) {
		client.SendOperationProgress(p)
		if p.GetState() != ironlinkv1.OperationState_OPERATION_STATE_RUNNING {
			if ag := ready.get(); ag != nil {
				ag.PollSoon()
			}
		}
	}
	r := operations.New(ctx, clients, cfg.Operations, send, log)
	r.SetHardwareReader(func(ctx context.Context, id string) error {
		ag := ready.get()
		if ag == nil {
			return operations.ErrNoHardwareReader
		}
		return ag.RereadHardware(ctx, id)
	})
	ready.setOperations(r)
	log.Info("operations credential works: announcing the operations capability", "cloud", oc.Cloud, "nova", clients.Compute != nil)
	client.Rehello()
}

// linkWait is how long the link waits for the first attempt to reach
// OpenStack before coming up without it.
const linkWait = 10 * time.Second

// connectBackoff is the wait between Connect attempts: from 1 s, doubling
// up to 10 min. A refused credential is also held back by the AuthGuard.
func connectBackoff(first time.Duration) *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = time.Second
	if first > 0 && first < b.InitialInterval {
		b.InitialInterval = first
	}
	b.MaxInterval = 10 * time.Minute
	return b
}

// deferred stands in for the agent until OpenStack is connected: no
// snapshot yet, commands refused (the hub retries them with backoff),
// desired states held until the agent exists.
type deferred struct {
	ready   chan struct{}
	caps    []string
	applied []*ironlinkv1.AppliedGeneration
	once    sync.Once
	ag      *agent.Agent
	opsMu   sync.Mutex
	ops     *operations.Runner
}

func (d *deferred) setOperations(r *operations.Runner) {
	d.opsMu.Lock()
	d.ops = r
	d.opsMu.Unlock()
}

// HandleOperation implements link.OperationHandler: requests go to the
// runner once the operations credential works (the hub sends none before
// the capability is announced).
func (d *deferred) HandleOperation(req *ironlinkv1.OperationRequest) {
	d.opsMu.Lock()
	r := d.ops
	d.opsMu.Unlock()
	if r == nil {
		return // the hub redelivers it after its timeout
	}
	r.Handle(req)
}

func (d *deferred) set(ag *agent.Agent, caps []string) {
	d.once.Do(func() { d.ag, d.caps = ag, caps; close(d.ready) })
}

// Capabilities are the site's capabilities once connected.
func (d *deferred) Capabilities() []string {
	if d.get() == nil {
		return nil
	}
	d.opsMu.Lock()
	defer d.opsMu.Unlock()
	if d.ops != nil {
		return append(append([]string(nil), d.caps...), "operations")
	}
	return d.caps
}

func (d *deferred) get() *agent.Agent {
	select {
	case <-d.ready:
		return d.ag
	default:
		return nil
	}
}

// Snapshot implements link.SnapshotFunc.
func (d *deferred) Snapshot() ([]*ironlinkv1.DeviceUpdate, bool) {
	if ag := d.get(); ag != nil {
		return ag.Snapshot()
	}
	return nil, false
}

// AppliedGenerations lists the agent's applied generations, or the state
// file's before the agent exists.
func (d *deferred) AppliedGenerations() []*ironlinkv1.AppliedGeneration {
	if ag := d.get(); ag != nil {
		return ag.AppliedGenerations()
	}
	return d.applied
}

// HandleCommand implements link.CommandHandler.
func (d *deferred) HandleCommand(ctx context.Context, c *ironlinkv1.Command) *ironlinkv1.CommandResult {
	if ag := d.get(); ag != nil {
		return ag.HandleCommand(ctx, c)
	}
	return &ironlinkv1.CommandResult{CommandId: c.GetCommandId(), DeviceId: c.GetDeviceId(), Generation: c.GetGeneration(),
		Error:         "the satellite is not connected to OpenStack yet (see the site condition OpenStackAuthenticated); the hub retries",
		FailureClass:  ironlinkv1.FailureClass_FAILURE_CLASS_TRANSIENT,
		FailureReason: "OpenStackNotConnected"}
}

// HandleDesiredStates implements link.DesiredStateHandler.
func (d *deferred) HandleDesiredStates(ctx context.Context, s *ironlinkv1.DesiredStates) []*ironlinkv1.DriftCorrection {
	select {
	case <-d.ready:
		return d.ag.HandleDesiredStates(ctx, s)
	case <-ctx.Done():
		return nil
	}
}

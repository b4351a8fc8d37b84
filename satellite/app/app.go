// Package app wires the satellite together: OpenStack clients from
// clouds.yaml, the Ironic and Placement clients, the polling agent and the
// link to the hub. cmd/ironlink-satellite only parses flags and calls Run.
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
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/sitename"
	"github.com/ironlink/ironlink/internal/telemetry"
	"github.com/ironlink/ironlink/internal/tlsutil"
	"github.com/ironlink/ironlink/internal/version"
	"github.com/ironlink/ironlink/satellite/agent"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/link"
	"github.com/ironlink/ironlink/satellite/metrics"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/operations"
	"github.com/ironlink/ironlink/satellite/placement"
)

// Config is the satellite's runtime configuration (see docs/reference/ironlink-satellite.md).
type Config struct {
	// Site is this satellite's site name ([a-z0-9-], 1-63 bytes).
	Site string
	// HubAddr is the hub's host:port.
	HubAddr string
	// OpenStack says where clouds.yaml is, which cloud, and whether Placement is used.
	OpenStack openstack.Config
	// Agent configures polling and the condition mapping.
	Agent agent.Config
	// Link tunes the hub link (heartbeat, keepalive, backoff); Site,
	// HubAddr and the credentials are filled in by Run.
	Link link.Config
	// Identity is how the satellite proves itself to the hub.
	Identity Identity
	// MetricsAddr, when set, is the host:port serving Prometheus /metrics.
	MetricsAddr string
	// AuthBackoff is the first wait after a failed Keystone token request
	// (doubling up to 10 min); 0 means 30 s.
	AuthBackoff time.Duration
	// OperationsCloud, when set, is the cloud in the same clouds.yaml whose
	// application credential runs operations (docs/design/operations.md; rules in
	// deploy/openstack/operations-access-rules.yaml). The "operations"
	// capability is announced only once it authenticates; empty: no
	// operations, observation and quarantine unchanged.
	OperationsCloud string
	// Operations tunes the operations runner (poll interval, concurrency).
	Operations operations.Config
}

// Identity holds the satellite's credentials towards the hub: a private key
// for RFC 7523 client assertions and the TLS settings.
type Identity struct {
	// KeyFile is the client's private key (PKCS#8 PEM); required unless NoAuth.
	KeyFile string
	// KID names the key in the hub's roster (default: its RFC 7638 thumbprint).
	KID string
	// ClientID defaults to ironlink-agent-<site>.
	ClientID string
	// Audience is the hub's JWT audience (default "ironlink-hub").
	Audience string
	// NoAuth sends no assertion (hub running with --no-auth).
	NoAuth bool
	// CAFile verifies the hub's certificate (default: system roots).
	CAFile string
	// ServerName overrides the name checked in the hub's certificate.
	ServerName string
	// ClientCert, ClientKey: optional certificate for mutual TLS.
	ClientCert, ClientKey string
	// Plaintext talks to the hub without TLS (local development only).
	Plaintext bool
}

// dialOptions turns id (validated: ClientID and Audience filled) into gRPC
// transport and per-RPC credentials. Errors: a TLS or key file that cannot
// be read or parsed.
func (id Identity) dialOptions() ([]grpc.DialOption, error) {
	var opts []grpc.DialOption
	if id.Plaintext {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	} else {
		tc, err := tlsutil.ClientConfig(id.CAFile, id.ClientCert, id.ClientKey, id.ServerName)
		if err != nil {
			return nil, fmt.Errorf("hub TLS: %w", err)
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	}
	if id.NoAuth {
		return opts, nil
	}
	key, err := auth.LoadPrivateKey(id.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("client key: %w", err)
	}
	kid := id.KID
	if kid == "" {
		if kid, err = auth.Thumbprint(key.Public()); err != nil {
			return nil, fmt.Errorf("client key: %w", err)
		}
	}
	return append(opts, grpc.WithPerRPCCredentials(&auth.ClientCredentials{
		Key: key, KID: kid, ClientID: id.ClientID, Audience: id.Audience, Insecure: id.Plaintext})), nil
}

// Validate checks c and returns it with every unset setting filled from
// [Defaults] (the only place defaults live; the flags show the same
// values). c itself is not changed: the returned Config is the one Run
// passes down. Every problem is reported (errors.Join), each naming the
// flag and environment variable to fix. The clouds.yaml it points at is
// read by [Check] and by Run, not here.
func (c Config) Validate() (Config, error) {
	d := Defaults()
	fill(&c.Agent.PollInterval, d.Agent.PollInterval)
	fill(&c.Agent.SweepInterval, d.Agent.SweepInterval)
	fill(&c.AuthBackoff, d.AuthBackoff)
	fill(&c.Link.HeartbeatInterval, d.Link.HeartbeatInterval)
	fill(&c.Link.KeepaliveTime, d.Link.KeepaliveTime)
	fill(&c.Link.KeepaliveTimeout, d.Link.KeepaliveTimeout)
	fill(&c.Link.ResyncInterval, d.Link.ResyncInterval)
	fill(&c.Link.MaxBackoff, d.Link.MaxBackoff)
	fill(&c.Identity.Audience, d.Identity.Audience)
	fill(&c.Operations.PollInterval, d.Operations.PollInterval)
	fill(&c.Operations.MaxConcurrent, d.Operations.MaxConcurrent)
	if c.Site != "" {
		fill(&c.Identity.ClientID, auth.SatelliteClientID(c.Site))
	}
	var errs []error
	if c.Site == "" {
		errs = append(errs, errors.New("site is required (--site or IRONLINK_SITE)"))
	} else if err := sitename.Check(c.Site); err != nil {
		errs = append(errs, fmt.Errorf("--site: %w", err))
	}
	if c.HubAddr == "" {
		errs = append(errs, errors.New("hub address is required (--hub or IRONLINK_HUB_ADDR)"))
	}
	if c.Identity.KeyFile == "" && !c.Identity.NoAuth {
		errs = append(errs, errors.New("a client key is required (--client-key or IRONLINK_CLIENT_KEY); --no-auth only for a hub running without authentication"))
	}
	if c.Operations.MaxConcurrent < 1 || c.Operations.PollInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("--operations-concurrency %d must be ≥ 1 and --operations-poll-interval %s ≥ 100ms", c.Operations.MaxConcurrent, c.Operations.PollInterval))
	}
	if c.Agent.PollInterval < time.Second {
		errs = append(errs, fmt.Errorf("poll interval %s is below 1s", c.Agent.PollInterval))
	}
	if _, _, err := openstack.CheckModes(c.OpenStack); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// Run opens the hub link, connects to OpenStack (retrying with backoff while
// Keystone or the services are unreachable or refuse the credential, which
// the link reports as the site condition OpenStackAuthenticated), then polls,
// sweeps and keeps the link until ctx ends.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	cfg.fromCredentials()
	cfg, err := cfg.Validate()
	if err != nil {
		return err
	}
	// The metrics port is taken first: a port in use is a start-up error
	// naming the flag, before anything talks to OpenStack.
	var metricsLn net.Listener
	if cfg.MetricsAddr != "" {
		if metricsLn, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			return fmt.Errorf("--metrics-addr %s (IRONLINK_METRICS_ADDR): %w", cfg.MetricsAddr, err)
		}
		defer metricsLn.Close()
	}
	dial, err := cfg.Identity.dialOptions()
	if err != nil {
		return err
	}
	applied, err := agent.ReadAppliedGenerations(cfg.Agent.StatePath)
	if err != nil {
		return err
	}
	m := metrics.New()
	site := link.NewSiteState(m.SiteCondition)
	guard := openstack.NewAuthGuard(log.With("component", "keystone"))
	guard.InitialInterval = cfg.AuthBackoff
	guard.OnChange = func(st openstack.AuthState) {
		site.Set(condition.Condition{Type: condition.OpenStackAuthenticated, Status: condition.Status(st.Status), Reason: st.Reason, Message: st.Message})
	}
	guard.OnTokenRequest = func(err error) { m.TokenRequest(err, openstack.IsAuthError(err)) }
	cfg.OpenStack.AuthGuard = guard
	// Every site condition is known from the first message on; the agent
	// replaces this one once OpenStack answers.
	site.Set(condition.Condition{Type: condition.OrphanDetection, Status: condition.Unknown, Reason: agent.ReasonNotConnected,
		Message: "not connected to OpenStack yet: whether the site has Nova is not known"})
	log = slog.New(telemetry.LogHandler(log.Handler())) // trace ids in log lines
	traceDial, wrap, flushTraces, err := setupTracing(log, m.Transport)
	if err != nil {
		return err
	}
	defer flushTraces()
	cfg.OpenStack.WrapTransport = wrap
	dial = append(dial, traceDial...)
	m.SetReadiness(metrics.ReadyConfig{PollInterval: cfg.Agent.PollInterval})
	cfg.Agent.Observer = m

	g, gctx := errgroup.WithContext(ctx)
	if metricsLn != nil {
		g.Go(func() error { return m.ServeListener(gctx, metricsLn) })
	}

	// The link comes up after the first attempt to reach OpenStack, whatever
	// its outcome, so a refused credential reaches the hub; commands wait for
	// the agent.
	firstAttempt := make(chan struct{})
	var firstOnce sync.Once
	ready := &deferred{ready: make(chan struct{}), applied: applied}
	outbox := link.NewOutbox()
	var boot [8]byte
	_, _ = rand.Read(boot[:])
	lc := cfg.Link
	lc.Site, lc.BootID, lc.Version, lc.HubAddr = cfg.Site, hex.EncodeToString(boot[:]), version.Version, cfg.HubAddr
	lc.DialOptions = append(lc.DialOptions, dial...)
	lc.Applied = ready.AppliedGenerations
	lc.SiteState = site
	lc.OnLinkState = m.LinkState
	m.SetOutbox(func() int { n, _ := outbox.Pending(); return n })
	lc.Capabilities = ready.Capabilities
	lc.Operations = ready
	client := link.NewClient(lc, outbox, ready.Snapshot, ready, log.With("component", "link"))
	cfg.Agent.RequestResync = client.RequestResync
	cfg.Agent.DesiredStatesWait = agent.DefaultDesiredStatesWait
	g.Go(func() error {
		select {
		case <-firstAttempt:
		case <-gctx.Done():
			return nil
		}
		return client.Run(gctx)
	})
	g.Go(func() error { notifySystemd(gctx, m.Ready, log.With("component", "systemd")); return nil })

	g.Go(func() error {
		// Bring the link up anyway if the first attempt hangs (Keystone
		// black-holed): the hub should see the site and why it is stuck.
		go func() {
			select {
			case <-time.After(linkWait):
				firstOnce.Do(func() { close(firstAttempt) })
			case <-gctx.Done():
			}
		}()
		clients, err := backoff.Retry(gctx, func() (*openstack.Clients, error) {
			// After a failed token request the guard decides when the
			// next one may go (--auth-backoff, doubling).
			if err := guard.Wait(gctx); err != nil {
				return nil, backoff.Permanent(err)
			}
			c, err := openstack.Connect(gctx, cfg.OpenStack, log)
			if errors.Is(err, openstack.ErrConfig) {
				return nil, backoff.Permanent(err) // retrying cannot fix a configuration error
			}
			if err != nil {
				log.Warn("cannot reach OpenStack yet; retrying", "err", err)
				firstOnce.Do(func() { close(firstAttempt) })
			}
			return c, err
		}, backoff.WithBackOff(connectBackoff(cfg.AuthBackoff)), backoff.WithMaxElapsedTime(0))
		if err != nil {
			if gctx.Err() != nil {
				return nil
			}
			if errors.Is(err, openstack.ErrConfig) {
				// clouds.yaml cannot work: the guard reported it as
				// OpenStackAuthenticated=False/ConfigInvalid; the link stays up
				// so the hub shows why, and nothing is retried (SPEC: never a
				// crash loop). A fixed file needs a restart.
				log.Error("OpenStack configuration invalid: not connecting; fix clouds.yaml and restart the satellite", "err", err)
				firstOnce.Do(func() { close(firstAttempt) })
				<-gctx.Done()
				return nil
			}
			return fmt.Errorf("connect to OpenStack: %w", err)
		}
		log.Info("OpenStack connected", "ironic_microversion", clients.IronicVersion,
			"placement_microversion", clients.PlacementVersion, "standalone", clients.Standalone(), "nova", clients.Compute != nil)
		eps := map[string]string{"baremetal": clients.Baremetal.Endpoint}
		cl := agent.Clients{Ironic: ironic.New(clients.Baremetal, log.With("component", "ironic"))}
		if !clients.Standalone() {
			cl.Placement = placement.New(clients.Placement, log.With("component", "placement"))
			eps["placement"] = clients.Placement.Endpoint
		}
		if clients.Compute != nil {
			cl.Nova = nova.New(clients.Compute, log.With("component", "nova"))
			eps["compute"] = clients.Compute.Endpoint
		}
		m.SetEndpoints(eps)
		var caps []string
		if cl.Placement != nil {
			caps = append(caps, "placement")
		}
		if cl.Nova != nil {
			caps = append(caps, "nova")
		}
		cfg.Agent.Conditions.Standalone = clients.Standalone()
		ag := agent.New(cfg.Agent, cl, outbox, site, log.With("component", "agent"))
		if err := ag.LoadState(); err != nil {
			return err
		}
		m.SetStats(func() metrics.Stats {
			s := ag.Stats()
			return metrics.Stats{Polls: s.Polls, FailedPolls: s.FailedPolls, Sweeps: s.Sweeps, FailedSweeps: s.FailedSweeps,
				Resyncs: s.Resyncs, DriftCorrections: s.DriftCorrections, InstanceMismatches: s.InstanceMismatches}
		})
		ready.set(ag, caps)
		firstOnce.Do(func() { close(firstAttempt) })
		if cfg.OperationsCloud != "" {
			go startOperations(gctx, cfg, ready, client, log.With("component", "operations"))
		}
		ag.Run(gctx)
		return nil
	})
	return g.Wait()
}

// startOperations connects with the operations credential (retrying with
// backoff while it fails) and then runs operations: the runner is handed to
// the link and "operations" joins the capabilities, announced by a fresh
// Hello.
func startOperations(ctx context.Context, cfg Config, ready *deferred, client *link.Client, log *slog.Logger) {
	oc := cfg.OpenStack
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

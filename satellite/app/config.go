package app

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/sitename"
	"github.com/ironlink/ironlink/internal/tlsutil"
	"github.com/ironlink/ironlink/satellite/agent"
	"github.com/ironlink/ironlink/satellite/healthdoor"
	"github.com/ironlink/ironlink/satellite/link"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/operations"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// The satellite's configuration goes one way (SPIRE's shape): flags and
// the environment (cmd/ironlink-satellite) or a caller fill an [Options];
// unset fields are zero. [Options.Validate] is the one step that checks it
// and fills the defaults of [Defaults], returning the [Config] that [Run]
// passes down. `ironlink-satellite validate` runs the same step and then
// [Check].

// Options is the satellite's configuration as given: by its flags and
// environment (cmd/ironlink-satellite), or by a caller embedding a
// satellite. A zero field means "the default" ([Defaults]).
// [Options.Validate] turns it into the [Config] that [Run] takes.
type Options struct {
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
	// Health configures the local health door (satellite/healthdoor).
	Health HealthDoor
}

// HealthDoor configures the satellite's local health door.
type HealthDoor struct {
	// Socket, when set, is the Unix socket path the door serves on (mode
	// 0660); empty: no door.
	Socket string
	// SpoolEvents bounds the events waiting for the hub (default 4096).
	SpoolEvents int
	// Wait is how long a door call waits for the hub's answer (default 30 s).
	Wait time.Duration
	// ReporterRate and ReporterBurst are each reporting agent's events per
	// second and burst at the door (default 200 and 2000; a rate < 0
	// limits nothing).
	ReporterRate  float64
	ReporterBurst int
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

// Validate checks o and returns the Config made of it, with the secret
// files left empty taken from systemd credentials (fromCredentials) and
// every unset setting filled from [Defaults] (the only place defaults
// live; the flags show the same values). o itself is not changed. Every
// problem is reported (errors.Join), each naming the flag and environment
// variable to fix; the Config returned with an error is not runnable. The
// clouds.yaml it points at is read by [Check] and by Run, not here.
func (o Options) Validate() (Config, error) {
	c := o
	c.fromCredentials()
	d := Defaults()
	fill(&c.Agent.PollInterval, d.Agent.PollInterval)
	fill(&c.Agent.SweepInterval, d.Agent.SweepInterval)
	fill(&c.Agent.HardwareReadsPerPoll, d.Agent.HardwareReadsPerPoll)
	fill(&c.Agent.CommandTimeout, d.Agent.CommandTimeout)
	fill(&c.AuthBackoff, d.AuthBackoff)
	fill(&c.Link.HeartbeatInterval, d.Link.HeartbeatInterval)
	fill(&c.Link.KeepaliveTime, d.Link.KeepaliveTime)
	fill(&c.Link.KeepaliveTimeout, d.Link.KeepaliveTimeout)
	fill(&c.Link.ResyncInterval, d.Link.ResyncInterval)
	fill(&c.Link.MaxBackoff, d.Link.MaxBackoff)
	fill(&c.Identity.Audience, d.Identity.Audience)
	fill(&c.Operations.PollInterval, d.Operations.PollInterval)
	fill(&c.Operations.MaxConcurrent, d.Operations.MaxConcurrent)
	fill(&c.Health.SpoolEvents, d.Health.SpoolEvents)
	fill(&c.Health.Wait, d.Health.Wait)
	fill(&c.Health.ReporterRate, d.Health.ReporterRate)
	fill(&c.Health.ReporterBurst, d.Health.ReporterBurst)
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
	if c.Health.SpoolEvents < healthdoor.MaxEvents {
		errs = append(errs, fmt.Errorf("--health-spool-events %d (IRONLINK_HEALTH_SPOOL_EVENTS): must hold one batch, at least %d", c.Health.SpoolEvents, healthdoor.MaxEvents))
	}
	if c.Health.Wait < 0 {
		errs = append(errs, fmt.Errorf("--health-wait %s (IRONLINK_HEALTH_WAIT) is negative", c.Health.Wait))
	}
	if c.Agent.CommandTimeout < time.Second {
		errs = append(errs, fmt.Errorf("--command-timeout %s (IRONLINK_COMMAND_TIMEOUT) is below 1s", c.Agent.CommandTimeout))
	}
	if c.Agent.PollInterval < time.Second {
		errs = append(errs, fmt.Errorf("poll interval %s is below 1s", c.Agent.PollInterval))
	}
	if _, _, err := openstack.CheckModes(c.OpenStack); err != nil {
		errs = append(errs, err)
	}
	return Config{Options: c, valid: len(errs) == 0}, errors.Join(errs...)
}

// Config is the satellite's runtime configuration: an [Options] with every
// default filled and every setting checked. Only [Options.Validate] makes
// one that [Run] accepts; it is passed by value and not changed after
// (what Run adds, such as the agent's observer, goes into copies).
type Config struct {
	Options
	valid bool
}

// Defaults returns the default of every satellite setting: the values the
// flags show (docs/reference/ironlink-satellite.md) and the ones Validate fills in for
// unset fields. Settings without a default (site, key, clouds.yaml, state
// file, metrics address: empty means off or "ask gophercloud") are empty.
func Defaults() Options {
	return Options{
		HubAddr:     "localhost:7070",
		AuthBackoff: 30 * time.Second,
		Agent: agent.Config{PollInterval: agent.DefaultPollInterval, SweepInterval: agent.DefaultSweepInterval,
			HardwareReadsPerPoll: agent.DefaultHardwareReadsPerPoll, CommandTimeout: agent.DefaultCommandTimeout},
		Link: link.Config{
			HeartbeatInterval: link.DefaultHeartbeatInterval,
			KeepaliveTime:     link.DefaultKeepaliveTime,
			KeepaliveTimeout:  link.DefaultKeepaliveTimeout,
			ResyncInterval:    link.DefaultResyncInterval,
			MaxBackoff:        link.DefaultMaxBackoff,
		},
		OpenStack:  openstack.Config{Placement: openstack.PlacementAuto, Nova: openstack.NovaAuto},
		Identity:   Identity{Audience: auth.DefaultAudience},
		Operations: operations.Config{PollInterval: operations.DefaultPollInterval, MaxConcurrent: operations.DefaultMaxConcurrent},
		Health: HealthDoor{SpoolEvents: healthdoor.DefaultSpoolEvents, Wait: healthdoor.DefaultWait,
			ReporterRate: healthdoor.DefaultReporterRate, ReporterBurst: healthdoor.DefaultReporterBurst},
	}
}

// fill sets *p to def when *p is the zero value.
func fill[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// Check runs Validate and then reads what the configuration points at,
// sending no request: the client key and the hub TLS files load, the
// metrics address is host:port, and clouds.yaml holds the cloud with
// complete auth options ([openstack.Check]: a password cloud without a user
// domain is refused here with gophercloud's message, as Run would report it
// in OpenStackAuthenticated=False/ConfigInvalid). It returns every problem
// found (errors.Join), or nil, and the cloud's auth method when clouds.yaml
// was read.
func Check(o Options) (openstack.AuthMethod, error) {
	c, err := o.Validate()
	errs := []error{err}
	if c.Identity.KeyFile != "" || c.Identity.NoAuth {
		if _, derr := c.Identity.dialOptions(); derr != nil {
			errs = append(errs, derr)
		}
	}
	if c.MetricsAddr != "" {
		if _, _, serr := net.SplitHostPort(c.MetricsAddr); serr != nil {
			errs = append(errs, fmt.Errorf("--metrics-addr %q: %w", c.MetricsAddr, serr))
		}
	}
	if c.OperationsCloud != "" {
		oc := c.OpenStack
		oc.Cloud = c.OperationsCloud
		if _, oerr := openstack.Check(oc); oerr != nil {
			errs = append(errs, fmt.Errorf("--operations-cloud %q (IRONLINK_OPERATIONS_CLOUD): %w", c.OperationsCloud, oerr))
		}
	}
	var method openstack.AuthMethod
	if checked, oerr := openstack.Check(c.OpenStack); oerr != nil {
		if !errors.Is(err, openstack.ErrConfig) { // Validate already named a bad mode
			errs = append(errs, oerr)
		}
	} else {
		method = checked.Method
	}
	return method, errors.Join(errs...)
}

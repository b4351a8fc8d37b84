package app

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ironlink/ironlink/hub/admission"
	"github.com/ironlink/ironlink/hub/fleet"
	"github.com/ironlink/ironlink/hub/healthapi"
	"github.com/ironlink/ironlink/hub/hwprofile"
	"github.com/ironlink/ironlink/hub/labelsfile"
	"github.com/ironlink/ironlink/hub/link"
	"github.com/ironlink/ironlink/hub/novatemplate"
	"github.com/ironlink/ironlink/hub/operations/vault"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/policyrun"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/throttle"
	"github.com/ironlink/ironlink/hub/validation"
	"github.com/ironlink/ironlink/hub/web"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/tlsutil"
)

// The hub's configuration goes one way (SPIRE's shape): flags and the
// environment (cmd/ironlink-hub) or a caller fill an [Options]; unset fields
// are zero. [Options.Validate] is the one step that checks it and fills the
// defaults of [Defaults], returning the [Config] that [Run] passes down by
// value. `ironlink-hub validate` runs the same step and then [Check].

// Options is the hub's configuration as given: by serve's flags and
// environment (cmd/ironlink-hub), or by a caller embedding a hub. A zero
// field means "the default" ([Defaults]), except where its comment says
// otherwise. [Options.Validate] turns it into the [Config] that [Run] takes.
type Options struct {
	// Listen is the gRPC listen address, host:port (default localhost:7070).
	Listen string
	// DatabaseURL is the PostgreSQL URL.
	DatabaseURL string
	// Replica names this process; the command's default is hostname-pid
	// (--replica), and Validate leaves an empty one empty.
	Replica string
	// StaleAfter: a site silent this long is UNREACHABLE (default 3 m = 3 poll intervals).
	StaleAfter time.Duration
	// Link tunes the link server.
	Link link.Config
	// History partitions condition_history and status_history by time and
	// drops whole partitions older than History.Retention (0 = keep
	// forever); flags --history-retention and --history-partition-interval,
	// Ahead has no flag (default 4) (docs/design/architecture.md "History partitions and retention").
	History store.PartitionPolicy
	// Keepalive: the server pings an idle connection after KeepaliveTime and
	// drops it when no answer comes within KeepaliveTimeout; clients may ping
	// at most every KeepaliveMinTime (must be ≤ the satellite's keepalive time).
	KeepaliveTime, KeepaliveTimeout, KeepaliveMinTime time.Duration
	// RosterPath is the YAML roster of clients (satellites and operators);
	// required unless NoAuth. Reloaded on SIGHUP and on change.
	RosterPath string
	// NoAuth turns client authentication off (local development only).
	NoAuth bool
	// Audience is the JWT "aud" clients must address (default "ironlink-hub").
	Audience string
	// MaxTokenLifetime refuses client assertions living longer (default 5 m).
	MaxTokenLifetime time.Duration
	// TLSCert, TLSKey are the server certificate and key files (PEM),
	// reloaded when they change; required unless Plaintext.
	TLSCert, TLSKey string
	// TLSClientCA, when set, requires client certificates signed by it
	// (mutual TLS), bound to the authenticated client id.
	TLSClientCA string
	// Plaintext serves without TLS (local development only).
	Plaintext bool
	// ShutdownGrace bounds graceful shutdown before connections are cut.
	ShutdownGrace time.Duration
	// MaxConnectionAge: connections older than this are asked to reconnect
	// (GOAWAY) so satellites spread over replicas; MaxConnectionAgeGrace then
	// bounds how long open streams may continue (defaults 30 m and 1 m; 0 = off).
	MaxConnectionAge, MaxConnectionAgeGrace time.Duration
	// Web is the fleet view (hub/web), off unless Web.Addr is set; it
	// authenticates against the roster even with NoAuth, and serves with
	// TLSCert/TLSKey unless Plaintext.
	Web web.Config
	// Throttle is the per-client rate limit and stream cap of the operator
	// API (the link is exempt); the zero value limits nothing, the flags
	// default to throttle.DefaultConfig.
	Throttle throttle.Config
	// Admission bounds what a request may cost before and while it is read
	// (hub/admission): per-service receive limits, streams per connection,
	// and the refusal of unauthenticated streams before their body is read;
	// zero fields take admission.DefaultConfig's values.
	Admission admission.Config
	// AdminAddr is the plaintext HTTP listener for /metrics, /healthz and
	// /readyz (host:port; "" = none). The command's default is DefaultAdminAddr.
	AdminAddr string
	// AdminPprof mounts Go's profiler (net/http/pprof) under /debug/pprof/
	// on the admin listener: CPU, heap, allocation and goroutine profiles of
	// the running replica (test/bench takes them under load). Off by default.
	AdminPprof bool
	// CommandPoolConns sizes the command path's own database pool
	// (quarantine, release, retry, command delivery and results; default
	// 4), apart from the main pool that condition ingest can keep busy.
	CommandPoolConns int32
	// SkipMigrate starts serving without applying migrations (they run in
	// `ironlink-hub migrate`, e.g. a Helm hook Job); the replica is not ready
	// while the schema is behind this binary.
	SkipMigrate bool
	// PolicyFile is the quarantine policy (hub/policy: the chart values'
	// `policy` key); "" = automatic quarantine off. Reloaded on SIGHUP and on
	// change; the last good file stays in force.
	PolicyFile string
	// Handoff is the repair handoff webhook of the remediation ladders.
	Handoff HandoffWebhook
	// HardwareProfilesFile is the hardware profiles file (hub/hwprofile);
	// "" = no profile, no HardwareMatchesProfile. Reloaded on SIGHUP and on
	// change; the last good file stays in force.
	HardwareProfilesFile string
	// LabelsFile is the failure-domain labels file (hub/labelsfile); "" =
	// only the labels the satellites map. Reloaded on SIGHUP and on
	// change; the last good file stays in force.
	LabelsFile string
	// NovaTemplatesFile is the named Nova create templates file
	// (hub/novatemplate); "" = no templates. Reloaded on SIGHUP and on
	// change; the last good file stays in force.
	NovaTemplatesFile string
	// ValidationTimeout fails a validation run still waiting for its
	// checks this long after it started (hub/validation; 0: the default
	// 2h; negative refused).
	ValidationTimeout time.Duration
	// WatchSendTimeout ends a WatchFleet stream whose consumer has not taken
	// a message for this long (its flow-control window full: it fell
	// behind) with ResourceExhausted WATCH_FELL_BEHIND naming the cursor to
	// resume from (hub/fleet; 0: the default 1 min; negative refused).
	WatchSendTimeout time.Duration
	// PolicyInterval is how often the policy evaluator runs on the replica
	// holding its advisory lock without a wake-up (default 1 s).
	PolicyInterval time.Duration
	// PolicyCoalesce is how long the evaluator waits after a device
	// entered FAULTED or MAINTENANCE before its pass (default 20 ms).
	PolicyCoalesce time.Duration
	// PolicyPollOnly: the evaluator is not woken by new faults, it runs
	// every PolicyInterval only.
	PolicyPollOnly bool
	// Health configures HealthService (hub/healthapi): the TTL of a health
	// condition whose event sends none (HealthDefaultTTL, default 10 m; per
	// agent HealthAgentTTL, "agent=duration,..."), and how often this
	// replica turns expired ones Unknown/Stale (HealthSweep, default 5 s).
	HealthDefaultTTL, HealthSweep time.Duration
	HealthAgentTTL                string
	// HealthReporterRate and HealthReporterBurst are each reporter's
	// health events per second and burst at HealthService (a reporter: a
	// client and agent; internal/reporterlimit); a rate < 0 limits nothing.
	HealthReporterRate  float64
	HealthReporterBurst int
	// EnrolKeyFile holds the key(s) that seal ENROL BMC credentials into
	// PostgreSQL (hub/operations/vault.LoadSealer: 32 bytes each, base64,
	// one per line, the first sealing; the same file on every replica); ""
	// keeps them in the memory of the replica that took the request, which
	// serves one replica only.
	EnrolKeyFile string
}

// Validate checks o and returns the Config made of it, with every unset
// setting filled from [Defaults] (the only place defaults live; the flags
// show the same values). o itself is not changed. Every problem is
// reported (errors.Join), each naming the flag and environment variable to
// fix; the Config returned with an error is not runnable.
// MaxConnectionAge is the one duration whose zero is kept (0 = never).
func (o Options) Validate() (Config, error) {
	c := o
	d := Defaults()
	var errs []error
	fill(&c.Listen, d.Listen)
	fill(&c.Audience, d.Audience)
	fill(&c.MaxTokenLifetime, d.MaxTokenLifetime)
	fill(&c.StaleAfter, d.StaleAfter)
	fill(&c.HealthDefaultTTL, d.HealthDefaultTTL)
	fill(&c.HealthSweep, d.HealthSweep)
	fill(&c.HealthReporterRate, d.HealthReporterRate)
	fill(&c.HealthReporterBurst, d.HealthReporterBurst)
	if _, err := healthapi.ParseAgentTTL(c.HealthAgentTTL); err != nil {
		errs = append(errs, fmt.Errorf("health-agent-ttl (IRONLINK_HUB_HEALTH_AGENT_TTL): %w", err))
	}
	if c.HealthDefaultTTL > healthapi.MaxTTL {
		errs = append(errs, fmt.Errorf("health-default-ttl (IRONLINK_HUB_HEALTH_DEFAULT_TTL) %s is above %s", c.HealthDefaultTTL, healthapi.MaxTTL))
	}
	fill(&c.KeepaliveTime, d.KeepaliveTime)
	fill(&c.KeepaliveTimeout, d.KeepaliveTimeout)
	fill(&c.KeepaliveMinTime, d.KeepaliveMinTime)
	fill(&c.MaxConnectionAgeGrace, d.MaxConnectionAgeGrace)
	fill(&c.ShutdownGrace, d.ShutdownGrace)
	fill(&c.Link.HeartbeatInterval, d.Link.HeartbeatInterval)
	fill(&c.Link.CommandSweep, d.Link.CommandSweep)
	fill(&c.Link.Delivery.ResendAfter, d.Link.Delivery.ResendAfter)
	fill(&c.Link.Delivery.FailureBackoff, d.Link.Delivery.FailureBackoff)
	fill(&c.Link.Delivery.MaxFailureBackoff, d.Link.Delivery.MaxFailureBackoff)
	fill(&c.Link.HelloTimeout, d.Link.HelloTimeout)
	fill(&c.Link.Operations.PerSiteLimit, d.Link.Operations.PerSiteLimit)
	fill(&c.Link.Operations.ResendAfter, d.Link.Operations.ResendAfter)
	fill(&c.Link.Operations.MaxResendAfter, d.Link.Operations.MaxResendAfter)
	fill(&c.PolicyInterval, d.PolicyInterval)
	fill(&c.PolicyCoalesce, d.PolicyCoalesce)
	fill(&c.ValidationTimeout, d.ValidationTimeout)
	fill(&c.WatchSendTimeout, d.WatchSendTimeout)
	fill(&c.History.Interval, d.History.Interval)
	fill(&c.History.Ahead, d.History.Ahead)
	if c.History.Interval < time.Hour || c.History.Ahead < 1 || c.History.Retention < 0 {
		errs = append(errs, fmt.Errorf("history partitions: interval %s must be at least 1h, ahead %d at least 1, retention %s not negative (--history-partition-interval, --history-retention)",
			c.History.Interval, c.History.Ahead, c.History.Retention))
	}
	fill(&c.Link.LastSeenFlush, d.Link.LastSeenFlush)
	fill(&c.CommandPoolConns, d.CommandPoolConns)
	if c.DatabaseURL == "" {
		errs = append(errs, errors.New("database URL is required (--database-url or DATABASE_URL)"))
	}
	if c.RosterPath == "" && !c.NoAuth {
		errs = append(errs, errors.New("a client roster is required (--roster or IRONLINK_HUB_ROSTER); --no-auth turns authentication off for local development"))
	}
	if (c.TLSCert == "" || c.TLSKey == "") && !c.Plaintext {
		errs = append(errs, errors.New("a TLS certificate and key are required (--tls-cert, --tls-key); --plaintext serves without TLS for local development"))
	}
	if c.StaleAfter < time.Second {
		errs = append(errs, fmt.Errorf("stale-after %s is below 1s", c.StaleAfter))
	}
	if c.Link.LastSeenFlush > 0 && c.StaleAfter <= c.Link.LastSeenFlush {
		errs = append(errs, fmt.Errorf("stale-after %s must be larger than the last-seen flush interval %s (--last-seen-flush): a live site's last_seen_at lags by up to that much", c.StaleAfter, c.Link.LastSeenFlush))
	}
	if c.CommandPoolConns < 0 {
		errs = append(errs, fmt.Errorf("--command-pool-conns %d is negative", c.CommandPoolConns))
	}
	if c.KeepaliveMinTime > c.KeepaliveTime {
		errs = append(errs, fmt.Errorf("keepalive min time %s is above the keepalive time %s", c.KeepaliveMinTime, c.KeepaliveTime))
	}
	for _, n := range []struct {
		name string
		d    time.Duration
	}{
		{"--max-token-lifetime", c.MaxTokenLifetime}, {"--heartbeat-interval", c.Link.HeartbeatInterval},
		{"--command-sweep", c.Link.CommandSweep}, {"--command-resend-after", c.Link.Delivery.ResendAfter},
		{"--command-failure-backoff", c.Link.Delivery.FailureBackoff}, {"--max-connection-age", c.MaxConnectionAge},
		{"--keepalive-time", c.KeepaliveTime}, {"--keepalive-timeout", c.KeepaliveTimeout},
		{"--last-seen-flush", c.Link.LastSeenFlush}, {"--validation-timeout", c.ValidationTimeout},
		{"--watch-send-timeout", c.WatchSendTimeout},
	} {
		if n.d < 0 {
			errs = append(errs, fmt.Errorf("%s %s is negative", n.name, n.d))
		}
	}
	if err := c.Admission.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Handoff.validate(); err != nil {
		errs = append(errs, err)
	}
	c.Link.Replica = c.Replica
	if c.Web.Addr != "" {
		if c.RosterPath == "" {
			errs = append(errs, errors.New("the fleet view (--web-addr) needs a roster (--roster): it never serves without authentication"))
		}
		c.Web.TLSCert, c.Web.TLSKey, c.Web.Plaintext = c.TLSCert, c.TLSKey, c.Plaintext
		if err := c.Web.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return Config{Options: c, valid: len(errs) == 0}, errors.Join(errs...)
}

// Config is the hub's runtime configuration: an [Options] with every
// default filled and every setting checked. Only [Options.Validate] makes
// one that [Run] accepts; it is passed by value and not changed after
// (what Run builds from it, such as the link server's hooks, goes into
// copies).
type Config struct {
	Options
	valid bool
}

// Defaults returns the default of every hub setting: the values the flags
// show (docs/reference/ironlink-hub.md) and the ones Validate fills in for unset
// fields. Settings without a default (database URL, roster, TLS files,
// replica name) are empty here.
func Defaults() Options {
	return Options{
		Listen:                "localhost:7070",
		Audience:              auth.DefaultAudience,
		MaxTokenLifetime:      auth.DefaultMaxLifetime,
		StaleAfter:            3 * time.Minute,
		HealthDefaultTTL:      10 * time.Minute,
		HealthSweep:           5 * time.Second,
		HealthReporterRate:    200,
		HealthReporterBurst:   2000,
		KeepaliveTime:         30 * time.Second,
		KeepaliveTimeout:      10 * time.Second,
		KeepaliveMinTime:      10 * time.Second,
		MaxConnectionAge:      30 * time.Minute,
		MaxConnectionAgeGrace: time.Minute,
		ShutdownGrace:         10 * time.Second,
		PolicyInterval:        policyrun.DefaultInterval,
		PolicyCoalesce:        policyrun.DefaultCoalesce,
		ValidationTimeout:     validation.DefaultTimeout,
		WatchSendTimeout:      fleet.DefaultWatchSendTimeout,
		History:               store.PartitionPolicy{Interval: store.DefaultPartitionInterval, Ahead: store.DefaultPartitionsAhead},
		CommandPoolConns:      4,
		// Not filled by Validate: a zero Throttle means "no limit" (tests,
		// embedded hubs); the flags default to these values.
		Throttle:  throttle.DefaultConfig(),
		Admission: admission.DefaultConfig(),
		Link: link.Config{
			HeartbeatInterval: link.DefaultHeartbeatInterval,
			CommandSweep:      link.DefaultCommandSweep,
			HelloTimeout:      link.DefaultHelloTimeout,
			LastSeenFlush:     link.DefaultLastSeenFlush,
			Delivery: store.DeliveryPolicy{
				ResendAfter:       link.DefaultResendAfter,
				FailureBackoff:    link.DefaultFailureBackoff,
				MaxFailureBackoff: link.DefaultMaxFailureBackoff,
			},
			Operations: store.OperationDelivery{
				PerSiteLimit:   link.DefaultOperationsPerSite,
				ResendAfter:    link.DefaultOperationResendAfter,
				MaxResendAfter: link.DefaultOperationMaxResendAfter,
			},
		},
	}
}

// fill sets *p to def when *p is the zero value.
func fill[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// Check runs Validate and then reads what the configuration points at
// without serving or touching the database: the database URL parses, the
// listen address is host:port, the roster loads (every entry checked, as at
// a reload), the policy file and the enrolment key load, the TLS
// certificate and key (and the client CA bundle) load.
// It returns every problem found (errors.Join, one per line when printed),
// or nil. It opens no connection: a database that is down is not reported.
func Check(o Options) error {
	c, err := o.Validate()
	errs := []error{err}
	if c.DatabaseURL != "" {
		if _, perr := pgxpool.ParseConfig(c.DatabaseURL); perr != nil {
			errs = append(errs, fmt.Errorf("--database-url: %w", perr))
		}
	}
	if _, _, serr := net.SplitHostPort(c.Listen); serr != nil {
		errs = append(errs, fmt.Errorf("--listen %q: %w", c.Listen, serr))
	}
	if !c.NoAuth && c.RosterPath != "" {
		if _, rerr := auth.LoadRoster(c.RosterPath); rerr != nil {
			errs = append(errs, fmt.Errorf("--roster: %w", rerr))
		}
	}
	if c.PolicyFile != "" {
		if _, perr := policy.Load(c.PolicyFile); perr != nil {
			errs = append(errs, fmt.Errorf("--policy-file: %w", perr))
		}
	}
	if c.Handoff.SecretFile != "" {
		if _, herr := c.Handoff.Secret(); herr != nil {
			errs = append(errs, herr)
		}
	}
	if c.LabelsFile != "" {
		if _, perr := labelsfile.Load(c.LabelsFile); perr != nil {
			errs = append(errs, fmt.Errorf("--labels-file: %w", perr))
		}
	}
	if c.HardwareProfilesFile != "" {
		if _, perr := hwprofile.Load(c.HardwareProfilesFile); perr != nil {
			errs = append(errs, fmt.Errorf("--hardware-profiles-file: %w", perr))
		}
	}
	if c.NovaTemplatesFile != "" {
		if _, terr := novatemplate.Load(c.NovaTemplatesFile); terr != nil {
			errs = append(errs, fmt.Errorf("--nova-templates-file: %w", terr))
		}
	}
	if c.EnrolKeyFile != "" {
		if _, kerr := vault.LoadSealer(c.EnrolKeyFile); kerr != nil {
			errs = append(errs, fmt.Errorf("--enrol-key-file: %w", kerr))
		}
	}
	if !c.Plaintext && c.TLSCert != "" && c.TLSKey != "" {
		if _, terr := tlsutil.ServerConfig(c.TLSCert, c.TLSKey, c.TLSClientCA); terr != nil {
			errs = append(errs, fmt.Errorf("TLS (--tls-cert, --tls-key, --tls-client-ca): %w", terr))
		}
	}
	return errors.Join(errs...)
}

// Warnings returns what o's configuration has that is valid but cannot work
// as written (policy.File.Warnings of --policy-file against --stale-after,
// at the time of the call), for `ironlink-hub validate` to print; nil when
// there is no policy file or it does not load (Check names that).
func Warnings(o Options) []string {
	c, err := o.Validate()
	if err != nil || c.PolicyFile == "" {
		return nil
	}
	f, err := policy.Load(c.PolicyFile)
	if err != nil {
		return nil
	}
	return f.Warnings(c.StaleAfter, time.Now())
}

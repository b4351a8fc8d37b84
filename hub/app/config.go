package app

import (
	"errors"
	"fmt"
	"github.com/ironlink/ironlink/hub/throttle"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ironlink/ironlink/hub/link"
	"github.com/ironlink/ironlink/hub/operations/vault"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/policyrun"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/tlsutil"
)

// The hub's configuration goes one way (SPIRE's shape): flags or the
// environment (cmd/ironlink-hub) or a caller fill a [Config]; unset fields
// are zero. [Config.Validate] is the one step that checks it and fills the
// defaults of [Defaults], returning the Config that [Run] passes down by
// value. `ironlink-hub validate` runs the same step and then [Check].

// Defaults returns the default of every hub setting: the values the flags
// show (docs/reference/ironlink-hub.md) and the ones Validate fills in for unset
// fields. Settings without a default (database URL, roster, TLS files,
// replica name) are empty here.
func Defaults() Config {
	return Config{
		Listen:                "localhost:7070",
		Audience:              "ironlink-hub",
		MaxTokenLifetime:      auth.DefaultMaxLifetime,
		StaleAfter:            3 * time.Minute,
		KeepaliveTime:         30 * time.Second,
		KeepaliveTimeout:      10 * time.Second,
		KeepaliveMinTime:      10 * time.Second,
		MaxConnectionAge:      30 * time.Minute,
		MaxConnectionAgeGrace: time.Minute,
		ShutdownGrace:         10 * time.Second,
		PolicyInterval:        policyrun.DefaultInterval,
		History:               store.PartitionPolicy{Interval: store.DefaultPartitionInterval, Ahead: store.DefaultPartitionsAhead},
		CommandPoolConns:      4,
		// Not filled by Validate: a zero Throttle means "no limit" (tests,
		// embedded hubs); the flags default to these values.
		Throttle: throttle.DefaultConfig(),
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
func Check(c Config) error {
	c, err := c.Validate()
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

package app

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/ironlink/ironlink/satellite/agent"
	"github.com/ironlink/ironlink/satellite/link"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/operations"
)

// The satellite's configuration goes one way (SPIRE's shape): flags or the
// environment (cmd/ironlink-satellite) or a caller fill a [Config]; unset
// fields are zero. [Config.Validate] is the one step that checks it and
// fills the defaults of [Defaults], returning the Config that [Run] passes
// down. `ironlink-satellite validate` runs the same step and then [Check].

// Defaults returns the default of every satellite setting: the values the
// flags show (docs/reference/ironlink-satellite.md) and the ones Validate fills in for
// unset fields. Settings without a default (site, key, clouds.yaml, state
// file, metrics address: empty means off or "ask gophercloud") are empty.
func Defaults() Config {
	return Config{
		HubAddr:     "localhost:7070",
		AuthBackoff: 30 * time.Second,
		Agent:       agent.Config{PollInterval: agent.DefaultPollInterval, SweepInterval: agent.DefaultSweepInterval},
		Link: link.Config{
			HeartbeatInterval: link.DefaultHeartbeatInterval,
			KeepaliveTime:     link.DefaultKeepaliveTime,
			KeepaliveTimeout:  link.DefaultKeepaliveTimeout,
			ResyncInterval:    link.DefaultResyncInterval,
			MaxBackoff:        link.DefaultMaxBackoff,
		},
		OpenStack:  openstack.Config{Placement: openstack.PlacementAuto, Nova: openstack.NovaAuto},
		Identity:   Identity{Audience: "ironlink-hub"},
		Operations: operations.Config{PollInterval: operations.DefaultPollInterval, MaxConcurrent: operations.DefaultMaxConcurrent},
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
func Check(c Config) (openstack.AuthMethod, error) {
	c, err := c.Validate()
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

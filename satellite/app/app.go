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
	"time"

	"github.com/cenkalti/backoff/v5"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/sitename"
	"github.com/ironlink/ironlink/internal/tlsutil"
	"github.com/ironlink/ironlink/internal/version"
	"github.com/ironlink/ironlink/satellite/agent"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/link"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/placement"
)

// Config is the satellite's runtime configuration (see README "Configuration").
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

// dialOptions turns id into gRPC transport and per-RPC credentials.
func (id Identity) dialOptions(site string) ([]grpc.DialOption, error) {
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
	clientID := id.ClientID
	if clientID == "" {
		clientID = auth.SatelliteClientID(site)
	}
	aud := id.Audience
	if aud == "" {
		aud = "ironlink-hub"
	}
	return append(opts, grpc.WithPerRPCCredentials(&auth.ClientCredentials{
		Key: key, KID: kid, ClientID: clientID, Audience: aud, Insecure: id.Plaintext})), nil
}

// Validate checks c. Errors name the bad setting.
func (c *Config) Validate() error {
	if c.Site == "" {
		return errors.New("site is required (--site or IRONLINK_SITE)")
	}
	if err := sitename.Check(c.Site); err != nil {
		return fmt.Errorf("--site: %w", err)
	}
	if c.HubAddr == "" {
		return errors.New("hub address is required (--hub or IRONLINK_HUB_ADDR)")
	}
	if c.Identity.KeyFile == "" && !c.Identity.NoAuth {
		return errors.New("a client key is required (--client-key or IRONLINK_CLIENT_KEY); --no-auth only for a hub running without authentication")
	}
	if c.Agent.PollInterval < time.Second {
		return fmt.Errorf("poll interval %s is below 1s", c.Agent.PollInterval)
	}
	return nil
}

// Run connects to OpenStack (retrying with backoff while Keystone or the
// services are unreachable), then polls and keeps the hub link until ctx ends.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	dial, err := cfg.Identity.dialOptions(cfg.Site)
	if err != nil {
		return err
	}
	clients, err := backoff.Retry(ctx, func() (*openstack.Clients, error) {
		c, err := openstack.Connect(ctx, cfg.OpenStack, log)
		if errors.Is(err, openstack.ErrConfig) {
			return nil, backoff.Permanent(err) // retrying cannot fix a configuration error
		}
		if err != nil {
			log.Warn("cannot reach OpenStack yet; retrying", "err", err)
		}
		return c, err
	}, backoff.WithBackOff(backoff.NewExponentialBackOff()), backoff.WithMaxElapsedTime(0))
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("connect to OpenStack: %w", err)
	}
	log.Info("OpenStack connected", "ironic_microversion", clients.IronicVersion,
		"placement_microversion", clients.PlacementVersion, "standalone", clients.Standalone())
	ir := ironic.New(clients.Baremetal, log.With("component", "ironic"))
	var pl *placement.Client
	caps := []string{}
	if !clients.Standalone() {
		pl = placement.New(clients.Placement, log.With("component", "placement"))
		caps = append(caps, "placement")
	}
	cfg.Agent.Conditions.Standalone = clients.Standalone()
	outbox := link.NewOutbox()
	ag := agent.New(cfg.Agent, ir, pl, outbox, log.With("component", "agent"))
	if err := ag.LoadState(); err != nil {
		return err
	}
	var boot [8]byte
	_, _ = rand.Read(boot[:])
	lc := cfg.Link
	lc.Site, lc.BootID, lc.Version, lc.Capabilities, lc.HubAddr = cfg.Site, hex.EncodeToString(boot[:]), version.Version, caps, cfg.HubAddr
	lc.DialOptions = append(lc.DialOptions, dial...)
	lc.Applied = ag.AppliedGenerations
	client := link.NewClient(lc, outbox, ag.Snapshot, ag, log.With("component", "link"))

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { ag.Run(gctx); return nil })
	g.Go(func() error { return client.Run(gctx) })
	return g.Wait()
}

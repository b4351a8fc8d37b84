// Command ironlink-satellite runs one site's satellite: it polls that site's
// OpenStack Ironic (and Placement), streams device conditions to the hub and
// applies the hub's quarantine/release commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ironlink/ironlink/internal/cli"
	"github.com/ironlink/ironlink/internal/version"
	"github.com/ironlink/ironlink/satellite/app"
	"github.com/ironlink/ironlink/satellite/conditions"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "ironlink-satellite:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) > 0 && args[0] == "version" {
		fmt.Println(version.String())
		return nil
	}
	fs := flag.NewFlagSet("ironlink-satellite", flag.ContinueOnError)
	fs.Usage = cli.Usage(fs, "ironlink-satellite [flags]")
	var cfg app.Config
	var pool, internal, logLevel, logFormat string
	poll, err := cli.EnvDuration("IRONLINK_POLL_INTERVAL", time.Minute)
	if err != nil {
		return err
	}
	fs.StringVar(&cfg.Site, "site", cli.Env("IRONLINK_SITE", ""), "site name, [a-z0-9-] (env IRONLINK_SITE; required)")
	fs.StringVar(&cfg.HubAddr, "hub", cli.Env("IRONLINK_HUB_ADDR", "localhost:7070"), "hub gRPC address host:port (env IRONLINK_HUB_ADDR)")
	fs.StringVar(&cfg.OpenStack.CloudsYAML, "clouds-yaml", cli.Env("OS_CLIENT_CONFIG_FILE", ""), "path of clouds.yaml; empty: gophercloud's search path (env OS_CLIENT_CONFIG_FILE)")
	fs.StringVar(&cfg.OpenStack.Cloud, "cloud", cli.Env("OS_CLOUD", ""), "cloud name in clouds.yaml (env OS_CLOUD)")
	fs.StringVar(&cfg.OpenStack.Placement, "placement", cli.Env("IRONLINK_PLACEMENT", "auto"), "auto (from the Keystone catalog), on, or off for a standalone-Ironic site (env IRONLINK_PLACEMENT)")
	fs.StringVar(&cfg.OpenStack.Nova, "nova", cli.Env("IRONLINK_NOVA", "auto"), "auto (from the Keystone catalog), on, or off: whether the sweep compares Nova's servers with Ironic to find orphaned instances (env IRONLINK_NOVA)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", cli.Env("IRONLINK_METRICS_ADDR", ""), "host:port serving Prometheus metrics on /metrics; empty: off (env IRONLINK_METRICS_ADDR)")
	fs.DurationVar(&cfg.Agent.PollInterval, "poll-interval", poll, "interval between Ironic listings (env IRONLINK_POLL_INTERVAL)")
	fs.StringVar(&pool, "validation-pool", cli.Env("IRONLINK_VALIDATION_POOL", ""), "validation-pool selector, e.g. resource_class=gpu-validate or trait=CUSTOM_VALIDATION,conductor_group=burnin; empty: no pool (env IRONLINK_VALIDATION_POOL)")
	fs.StringVar(&internal, "internal-projects", cli.Env("IRONLINK_INTERNAL_PROJECTS", ""), "comma-separated project IDs that are not customers (env IRONLINK_INTERNAL_PROJECTS)")
	fs.StringVar(&cfg.Identity.KeyFile, "client-key", cli.Env("IRONLINK_CLIENT_KEY", ""), "private key (PKCS#8 PEM) for client assertions to the hub (env IRONLINK_CLIENT_KEY; required unless --no-auth)")
	fs.StringVar(&cfg.Identity.KID, "client-kid", cli.Env("IRONLINK_CLIENT_KID", ""), "key id in the hub's roster; default: the key's RFC 7638 thumbprint (env IRONLINK_CLIENT_KID)")
	fs.StringVar(&cfg.Identity.ClientID, "client-id", cli.Env("IRONLINK_CLIENT_ID", ""), "client id; default ironlink-agent-<site> (env IRONLINK_CLIENT_ID)")
	fs.StringVar(&cfg.Identity.Audience, "audience", cli.Env("IRONLINK_HUB_AUDIENCE", "ironlink-hub"), "the hub's JWT audience (env IRONLINK_HUB_AUDIENCE)")
	fs.BoolVar(&cfg.Identity.NoAuth, "no-auth", false, "send no client assertion (for a hub running with --no-auth)")
	fs.StringVar(&cfg.Identity.CAFile, "hub-ca", cli.Env("IRONLINK_HUB_CA", ""), "CA bundle to verify the hub's certificate; default: system roots (env IRONLINK_HUB_CA)")
	fs.StringVar(&cfg.Identity.ServerName, "hub-server-name", cli.Env("IRONLINK_HUB_SERVER_NAME", ""), "name to check in the hub's certificate; default: the host of --hub (env IRONLINK_HUB_SERVER_NAME)")
	fs.StringVar(&cfg.Identity.ClientCert, "tls-client-cert", cli.Env("IRONLINK_TLS_CLIENT_CERT", ""), "client certificate for mutual TLS (env IRONLINK_TLS_CLIENT_CERT)")
	fs.StringVar(&cfg.Identity.ClientKey, "tls-client-key", cli.Env("IRONLINK_TLS_CLIENT_KEY", ""), "its private key (env IRONLINK_TLS_CLIENT_KEY)")
	fs.BoolVar(&cfg.Identity.Plaintext, "hub-plaintext", false, "talk to the hub without TLS (local development only)")
	fs.StringVar(&cfg.Agent.StatePath, "state-file", cli.Env("IRONLINK_STATE_FILE", ""), "JSON file keeping the applied command generations across restarts; empty: memory only (env IRONLINK_STATE_FILE)")
	for _, d := range []struct {
		p    *time.Duration
		name string
		env  string
		def  time.Duration
		help string
	}{
		{&cfg.Link.HeartbeatInterval, "heartbeat-interval", "IRONLINK_HEARTBEAT_INTERVAL", 20 * time.Second, "satellite → hub heartbeat (the hub's, if shorter, wins)"},
		{&cfg.Link.KeepaliveTime, "keepalive-time", "IRONLINK_KEEPALIVE_TIME", 30 * time.Second, "gRPC keepalive ping interval (≥ the hub's keepalive-min-time)"},
		{&cfg.Link.KeepaliveTimeout, "keepalive-timeout", "IRONLINK_KEEPALIVE_TIMEOUT", 10 * time.Second, "drop the link when a ping is not answered within this"},
		{&cfg.Agent.SweepInterval, "sweep-interval", "IRONLINK_SWEEP_INTERVAL", 5 * time.Minute, "how often assigned nodes are re-read one by one and Nova is compared with Ironic for orphaned instances"},
		{&cfg.AuthBackoff, "auth-backoff", "IRONLINK_AUTH_BACKOFF", 30 * time.Second, "first wait before asking Keystone for a token again after a failure (doubles up to 10 min)"},
		{&cfg.Link.ResyncInterval, "resync-interval", "IRONLINK_RESYNC_INTERVAL", 15 * time.Minute, "how often the desired quarantine/release state is re-applied to Ironic and Placement (also at every link start)"},
		{&cfg.Link.MaxBackoff, "max-backoff", "IRONLINK_MAX_BACKOFF", 30 * time.Second, "upper bound of the reconnect delay (exponential, full jitter)"},
	} {
		def, err := cli.EnvDuration(d.env, d.def)
		if err != nil {
			return err
		}
		fs.DurationVar(d.p, d.name, def, d.help+" (env "+d.env+")")
	}
	fs.StringVar(&logLevel, "log-level", cli.Env("IRONLINK_LOG_LEVEL", "info"), "debug, info, warn or error (env IRONLINK_LOG_LEVEL)")
	fs.StringVar(&logFormat, "log-format", cli.Env("IRONLINK_LOG_FORMAT", "text"), "text or json (env IRONLINK_LOG_FORMAT)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	sel, err := conditions.ParseSelector(pool)
	if err != nil {
		return fmt.Errorf("--validation-pool: %w", err)
	}
	cfg.Agent.Conditions.ValidationPool = sel
	for _, p := range strings.Split(internal, ",") {
		if p = strings.TrimSpace(p); p != "" {
			cfg.Agent.Conditions.InternalProjects = append(cfg.Agent.Conditions.InternalProjects, p)
		}
	}
	log, err := cli.NewLogger(logLevel, logFormat)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = app.Run(ctx, cfg, log.With("site", cfg.Site))
	if err == nil {
		log.Info("satellite stopped", "site", cfg.Site)
	}
	return err
}

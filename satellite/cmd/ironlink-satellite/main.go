// Command ironlink-satellite runs one site's satellite: it polls that site's
// OpenStack Ironic (and Placement), streams device conditions to the hub and
// applies the hub's quarantine/release commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ironlink/ironlink/internal/cli"
	"github.com/ironlink/ironlink/internal/logkey"
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
	if len(args) > 0 && args[0] == "validate" {
		return runValidate(args[1:], os.Stdout, os.Stderr)
	}
	fs := flag.NewFlagSet("ironlink-satellite", flag.ContinueOnError)
	fs.Usage = cli.Usage(fs, "ironlink-satellite [flags]\n       ironlink-satellite validate [flags]   check the configuration and exit\n       ironlink-satellite version")
	cfg, logLevel, logFormat, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	log, err := cli.NewLogger(logLevel, logFormat)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = app.Run(ctx, cfg, log.With(logkey.Site, cfg.Site))
	if err == nil {
		log.Info("satellite stopped", logkey.Site, cfg.Site)
	}
	return err
}

// parseFlags defines the satellite's flags on fs (their defaults are
// app.Defaults', overridden by the environment variables named), parses
// args and converts the selector and project list: the one loader run and
// validate share. It returns the unvalidated configuration and the log
// settings.
func parseFlags(fs *flag.FlagSet, args []string) (cfg app.Config, logLevel, logFormat string, err error) {
	def := app.Defaults()
	var pool, internal string
	poll, err := cli.EnvDuration("IRONLINK_POLL_INTERVAL", def.Agent.PollInterval)
	if err != nil {
		return cfg, "", "", err
	}
	fs.StringVar(&cfg.Site, "site", cli.Env("IRONLINK_SITE", ""), "site name, [a-z0-9-] (env IRONLINK_SITE; required)")
	fs.StringVar(&cfg.HubAddr, "hub", cli.Env("IRONLINK_HUB_ADDR", def.HubAddr), "hub gRPC address host:port (env IRONLINK_HUB_ADDR)")
	fs.StringVar(&cfg.OpenStack.CloudsYAML, "clouds-yaml", cli.Env("OS_CLIENT_CONFIG_FILE", ""), "path of clouds.yaml; empty: gophercloud's search path (env OS_CLIENT_CONFIG_FILE)")
	fs.StringVar(&cfg.OpenStack.Cloud, "cloud", cli.Env("OS_CLOUD", ""), "cloud name in clouds.yaml (env OS_CLOUD)")
	fs.StringVar(&cfg.OperationsCloud, "operations-cloud", cli.Env("IRONLINK_OPERATIONS_CLOUD", ""), "cloud in the same clouds.yaml whose application credential runs operations (enrol, clean, deploy, Nova create; rules in deploy/openstack/operations-access-rules.yaml); empty: no operations (env IRONLINK_OPERATIONS_CLOUD)")
	opsConc := def.Operations.MaxConcurrent
	if v := cli.Env("IRONLINK_OPERATIONS_CONCURRENCY", ""); v != "" {
		if opsConc, err = strconv.Atoi(v); err != nil {
			return cfg, "", "", fmt.Errorf("IRONLINK_OPERATIONS_CONCURRENCY=%q: not a number", v)
		}
	}
	fs.IntVar(&cfg.Operations.MaxConcurrent, "operations-concurrency", opsConc, "operations reconciled at once; the others wait (env IRONLINK_OPERATIONS_CONCURRENCY)")
	fs.StringVar(&cfg.OpenStack.Placement, "placement", cli.Env("IRONLINK_PLACEMENT", def.OpenStack.Placement), "auto (from the Keystone catalog), on, or off for a standalone-Ironic site (env IRONLINK_PLACEMENT)")
	fs.StringVar(&cfg.OpenStack.Nova, "nova", cli.Env("IRONLINK_NOVA", def.OpenStack.Nova), "auto (from the Keystone catalog), on, or off: whether the sweep compares Nova's servers with Ironic to find orphaned instances (env IRONLINK_NOVA)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", cli.Env("IRONLINK_METRICS_ADDR", ""), "host:port serving Prometheus metrics on /metrics; empty: off (env IRONLINK_METRICS_ADDR)")
	fs.DurationVar(&cfg.Agent.PollInterval, "poll-interval", poll, "interval between Ironic listings (env IRONLINK_POLL_INTERVAL)")
	fs.StringVar(&pool, "validation-pool", cli.Env("IRONLINK_VALIDATION_POOL", ""), "validation-pool selector, e.g. resource_class=gpu-validate or trait=CUSTOM_VALIDATION,conductor_group=burnin; empty: no pool (env IRONLINK_VALIDATION_POOL)")
	fs.StringVar(&internal, "internal-projects", cli.Env("IRONLINK_INTERNAL_PROJECTS", ""), "comma-separated project IDs that are not customers (env IRONLINK_INTERNAL_PROJECTS)")
	fs.StringVar(&cfg.Identity.KeyFile, "client-key", cli.Env("IRONLINK_CLIENT_KEY", ""), "private key (PKCS#8 PEM) for client assertions to the hub (env IRONLINK_CLIENT_KEY; required unless --no-auth)")
	fs.StringVar(&cfg.Identity.KID, "client-kid", cli.Env("IRONLINK_CLIENT_KID", ""), "key id in the hub's roster; default: the key's RFC 7638 thumbprint (env IRONLINK_CLIENT_KID)")
	fs.StringVar(&cfg.Identity.ClientID, "client-id", cli.Env("IRONLINK_CLIENT_ID", ""), "client id; default ironlink-agent-<site> (env IRONLINK_CLIENT_ID)")
	fs.StringVar(&cfg.Identity.Audience, "audience", cli.Env("IRONLINK_HUB_AUDIENCE", def.Identity.Audience), "the hub's JWT audience (env IRONLINK_HUB_AUDIENCE)")
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
		{&cfg.Link.HeartbeatInterval, "heartbeat-interval", "IRONLINK_HEARTBEAT_INTERVAL", def.Link.HeartbeatInterval, "satellite → hub heartbeat (the hub's, if shorter, wins)"},
		{&cfg.Link.KeepaliveTime, "keepalive-time", "IRONLINK_KEEPALIVE_TIME", def.Link.KeepaliveTime, "gRPC keepalive ping interval (≥ the hub's keepalive-min-time)"},
		{&cfg.Link.KeepaliveTimeout, "keepalive-timeout", "IRONLINK_KEEPALIVE_TIMEOUT", def.Link.KeepaliveTimeout, "drop the link when a ping is not answered within this"},
		{&cfg.Agent.SweepInterval, "sweep-interval", "IRONLINK_SWEEP_INTERVAL", def.Agent.SweepInterval, "how often assigned nodes are re-read one by one and Nova is compared with Ironic for orphaned instances"},
		{&cfg.AuthBackoff, "auth-backoff", "IRONLINK_AUTH_BACKOFF", def.AuthBackoff, "first wait before asking Keystone for a token again after a failure (doubles up to 10 min)"},
		{&cfg.Link.ResyncInterval, "resync-interval", "IRONLINK_RESYNC_INTERVAL", def.Link.ResyncInterval, "how often the desired quarantine/release state is re-applied to Ironic and Placement (also at every link start)"},
		{&cfg.Operations.PollInterval, "operations-poll-interval", "IRONLINK_OPERATIONS_POLL_INTERVAL", def.Operations.PollInterval, "wait between two reads of a node while an operation waits for Ironic or Nova"},
		{&cfg.Link.MaxBackoff, "max-backoff", "IRONLINK_MAX_BACKOFF", def.Link.MaxBackoff, "upper bound of the reconnect delay (exponential, full jitter)"},
	} {
		v, err := cli.EnvDuration(d.env, d.def)
		if err != nil {
			return cfg, "", "", err
		}
		fs.DurationVar(d.p, d.name, v, d.help+" (env "+d.env+")")
	}
	fs.StringVar(&logLevel, "log-level", cli.Env("IRONLINK_LOG_LEVEL", "info"), "debug, info, warn or error (env IRONLINK_LOG_LEVEL)")
	fs.StringVar(&logFormat, "log-format", cli.Env("IRONLINK_LOG_FORMAT", "text"), "text or json (env IRONLINK_LOG_FORMAT)")
	if err := fs.Parse(args); err != nil {
		return cfg, "", "", err
	}
	if fs.NArg() > 0 {
		return cfg, "", "", fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	sel, err := conditions.ParseSelector(pool)
	if err != nil {
		return cfg, "", "", fmt.Errorf("--validation-pool: %w", err)
	}
	cfg.Agent.Conditions.ValidationPool = sel
	for _, p := range strings.Split(internal, ",") {
		if p = strings.TrimSpace(p); p != "" {
			cfg.Agent.Conditions.InternalProjects = append(cfg.Agent.Conditions.InternalProjects, p)
		}
	}
	return cfg, logLevel, logFormat, nil
}

// runValidate implements `ironlink-satellite validate`: the flags and
// environment of a run, loaded and checked as a run would (app.Check: the
// settings, the client key and TLS files, the selector, clouds.yaml and
// its auth options) without contacting the hub or OpenStack. It prints one
// line per problem to stderr and returns cli.ErrInvalid, or one OK line (with
// the cloud's auth method) to stdout.
func runValidate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ironlink-satellite validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: ironlink-satellite validate [flags]\n\nChecks the configuration a run would use (flags and environment, the client key and\nTLS files, the validation-pool selector, clouds.yaml and its auth options; nothing is\ncontacted) and exits 1 when anything is wrong. Flags as for a run:\n")
		fs.PrintDefaults()
	}
	cfg, logLevel, logFormat, err := parseFlags(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	var problems []string
	var method string
	if err != nil {
		problems = append(problems, err.Error())
	} else {
		m, cerr := app.Check(cfg)
		method = string(m)
		problems = cli.Problems(cerr)
		if _, lerr := cli.NewLogger(logLevel, logFormat); lerr != nil {
			problems = append(problems, lerr.Error())
		}
	}
	if err := cli.ReportProblems(stderr, problems); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ironlink-satellite: configuration OK (site %s, cloud %q, %s)\n", cfg.Site, cfg.OpenStack.Cloud, method)
	return nil
}

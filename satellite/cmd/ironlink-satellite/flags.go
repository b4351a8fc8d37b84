package main

import (
	"fmt"
	"strings"

	"github.com/ironlink/ironlink/internal/cli"
	"github.com/ironlink/ironlink/internal/labels"
	"github.com/ironlink/ironlink/satellite/app"
	"github.com/ironlink/ironlink/satellite/conditions"
)

// The one place the satellite's flags are defined: each fills a field of
// app.Options, defaults to the value of app.Defaults and falls back to the
// environment variable it names (docs/reference/ironlink-satellite.md).

// satelliteFlags is what the flags and environment fill: the satellite's
// Options, the two settings converted after parsing, and the logger's.
type satelliteFlags struct {
	opts app.Options
	log  cli.LogOptions
	// validationPool is --validation-pool, parsed into
	// Options.Agent.Conditions.ValidationPool.
	validationPool string
	// internalProjects is --internal-projects, split into
	// Options.Agent.Conditions.InternalProjects.
	internalProjects string
	// labelMap is --label-map, parsed into Options.Agent.LabelMap.
	labelMap string
}

// parseFlags defines the satellite's flags on f (cli.NewCommand), parses
// args and converts the selector and the project list: the one loader run
// and validate share. It returns the unvalidated Options and the log
// settings; its error is the command line's, then every environment
// variable that did not parse, then a selector that does not parse.
func parseFlags(f *cli.Flags, args []string) (app.Options, cli.LogOptions, error) {
	var s satelliteFlags
	def := app.Defaults()
	bindSiteFlags(f, &s, def)
	bindHubFlags(f, &s.opts, def)
	bindPollFlags(f, &s.opts, def)
	bindOperationFlags(f, &s.opts, def)
	f.Group("logging")
	s.log.Bind(f)
	if err := f.Parse(args); err != nil {
		return s.opts, s.log, err
	}
	sel, err := conditions.ParseSelector(s.validationPool)
	if err != nil {
		return s.opts, s.log, fmt.Errorf("--validation-pool: %w", err)
	}
	s.opts.Agent.Conditions.ValidationPool = sel
	if s.opts.Agent.LabelMap, err = labels.ParseMapping(s.labelMap); err != nil {
		return s.opts, s.log, fmt.Errorf("--label-map: %w", err)
	}
	for _, p := range strings.Split(s.internalProjects, ",") {
		if p = strings.TrimSpace(p); p != "" {
			s.opts.Agent.Conditions.InternalProjects = append(s.opts.Agent.Conditions.InternalProjects, p)
		}
	}
	return s.opts, s.log, nil
}

// bindSiteFlags defines the site's, OpenStack's and the metrics' flags.
func bindSiteFlags(f *cli.Flags, s *satelliteFlags, def app.Options) {
	o := &s.opts
	f.Group("site and OpenStack")
	f.String(&o.Site, "site", "IRONLINK_SITE", "", "site name, [a-z0-9-] (env IRONLINK_SITE; required)")
	f.String(&o.OpenStack.CloudsYAML, "clouds-yaml", "OS_CLIENT_CONFIG_FILE", "", "path of clouds.yaml; empty: gophercloud's search path")
	f.String(&o.OpenStack.Cloud, "cloud", "OS_CLOUD", "", "cloud name in clouds.yaml")
	f.String(&o.OpenStack.Placement, "placement", "IRONLINK_PLACEMENT", def.OpenStack.Placement, "auto (from the Keystone catalog), on, or off for a standalone-Ironic site")
	f.Bool(&o.OpenStack.AllowInsecureTLS, "openstack-insecure-skip-verify", false, "accept verify: false in clouds.yaml (OpenStack's TLS certificates NOT verified; reported as site condition OpenStackTLSVerified False/VerifyDisabled); without it such a clouds.yaml is refused")
	f.String(&o.OpenStack.Nova, "nova", "IRONLINK_NOVA", def.OpenStack.Nova, "auto (from the Keystone catalog), on, or off: whether the sweep compares Nova's servers with Ironic to find orphaned instances")
	f.Duration(&o.AuthBackoff, "auth-backoff", "IRONLINK_AUTH_BACKOFF", def.AuthBackoff, "first wait before asking Keystone for a token again after a failure (doubles up to 10 min)")
	f.String(&o.MetricsAddr, "metrics-addr", "IRONLINK_METRICS_ADDR", "", "host:port serving Prometheus metrics on /metrics; empty: off")
	f.String(&o.Health.Socket, "health-socket", "IRONLINK_HEALTH_SOCKET", "", "Unix socket (mode 0660) of the local health door, NVSentinel's PlatformConnector; its reports go to the hub over the link; empty: no door")
	f.Int(&o.Health.SpoolEvents, "health-spool-events", "IRONLINK_HEALTH_SPOOL_EVENTS", def.Health.SpoolEvents, "health events the door keeps while the hub has not taken them (link down); when full the oldest are dropped")
	f.Float64(&o.Health.ReporterRate, "health-reporter-rate", "IRONLINK_HEALTH_REPORTER_RATE", def.Health.ReporterRate, "health events per second each reporting agent may send to the door before it is refused (ResourceExhausted), so one flooding monitor does not starve the others; -1: no limit")
	f.Int(&o.Health.ReporterBurst, "health-reporter-burst", "IRONLINK_HEALTH_REPORTER_BURST", def.Health.ReporterBurst, "health events an agent may send at once before --health-reporter-rate applies")
	f.Duration(&o.Health.Wait, "health-wait", "IRONLINK_HEALTH_WAIT", def.Health.Wait, "how long a door call waits for the hub's answer before it returns Unavailable (the events stay spooled)")
	f.String(&s.validationPool, "validation-pool", "IRONLINK_VALIDATION_POOL", "", "validation-pool selector, e.g. resource_class=gpu-validate or trait=CUSTOM_VALIDATION,conductor_group=burnin; empty: no pool")
	f.String(&s.labelMap, "label-map", "IRONLINK_LABEL_MAP", "", "failure-domain labels from Ironic node fields, e.g. rack=extra.rack,row=properties.row,pod=conductor_group (sources: extra.KEY, properties.KEY, conductor_group, owner, lessee, resource_class); empty: no labels")
	f.String(&s.internalProjects, "internal-projects", "IRONLINK_INTERNAL_PROJECTS", "", "comma-separated project IDs that are not customers")
	f.String(&o.Agent.StatePath, "state-file", "IRONLINK_STATE_FILE", "", "JSON file keeping the applied command generations across restarts; empty: memory only")
}

// bindHubFlags defines the hub link's and the identity's flags.
func bindHubFlags(f *cli.Flags, o *app.Options, def app.Options) {
	f.Group("hub link and identity")
	f.String(&o.HubAddr, "hub", "IRONLINK_HUB_ADDR", def.HubAddr, "hub gRPC address host:port")
	id := &o.Identity
	f.String(&id.KeyFile, "client-key", "IRONLINK_CLIENT_KEY", "", "private key (PKCS#8 PEM) for client assertions to the hub (env IRONLINK_CLIENT_KEY; required unless --no-auth)")
	f.String(&id.KID, "client-kid", "IRONLINK_CLIENT_KID", "", "key id in the hub's roster; default: the key's RFC 7638 thumbprint")
	f.String(&id.ClientID, "client-id", "IRONLINK_CLIENT_ID", "", "client id; default ironlink-agent-<site>")
	f.String(&id.Audience, "audience", "IRONLINK_HUB_AUDIENCE", def.Identity.Audience, "the hub's JWT audience")
	f.Bool(&id.NoAuth, "no-auth", false, "send no client assertion (for a hub running with --no-auth)")
	f.String(&id.CAFile, "hub-ca", "IRONLINK_HUB_CA", "", "CA bundle to verify the hub's certificate; default: system roots")
	f.String(&id.ServerName, "hub-server-name", "IRONLINK_HUB_SERVER_NAME", "", "name to check in the hub's certificate; default: the host of --hub")
	f.String(&id.ClientCert, "tls-client-cert", "IRONLINK_TLS_CLIENT_CERT", "", "client certificate for mutual TLS")
	f.String(&id.ClientKey, "tls-client-key", "IRONLINK_TLS_CLIENT_KEY", "", "its private key")
	f.Bool(&id.Plaintext, "hub-plaintext", false, "talk to the hub without TLS (local development only)")
	l := &o.Link
	f.Duration(&l.HeartbeatInterval, "heartbeat-interval", "IRONLINK_HEARTBEAT_INTERVAL", def.Link.HeartbeatInterval, "satellite → hub heartbeat (the hub's, if shorter, wins)")
	f.Duration(&l.KeepaliveTime, "keepalive-time", "IRONLINK_KEEPALIVE_TIME", def.Link.KeepaliveTime, "gRPC keepalive ping interval (≥ the hub's keepalive-min-time)")
	f.Duration(&l.KeepaliveTimeout, "keepalive-timeout", "IRONLINK_KEEPALIVE_TIMEOUT", def.Link.KeepaliveTimeout, "drop the link when a ping is not answered within this")
	f.Duration(&l.MaxBackoff, "max-backoff", "IRONLINK_MAX_BACKOFF", def.Link.MaxBackoff, "upper bound of the reconnect delay (exponential, full jitter)")
}

// bindPollFlags defines the polling, sweep and resync intervals.
func bindPollFlags(f *cli.Flags, o *app.Options, def app.Options) {
	f.Group("polling")
	f.Duration(&o.Agent.PollInterval, "poll-interval", "IRONLINK_POLL_INTERVAL", def.Agent.PollInterval, "interval between Ironic listings")
	f.Duration(&o.Agent.SweepInterval, "sweep-interval", "IRONLINK_SWEEP_INTERVAL", def.Agent.SweepInterval, "how often assigned nodes are re-read one by one and Nova is compared with Ironic for orphaned instances")
	f.Int(&o.Agent.HardwareReadsPerPoll, "hardware-reads-per-poll", "IRONLINK_HARDWARE_READS_PER_POLL", def.Agent.HardwareReadsPerPoll, "nodes whose inventory and BIOS settings one poll may read (a node is read on its first poll and when inspection_finished_at changes); -1 turns the reads off")
	f.Duration(&o.Agent.CommandTimeout, "command-timeout", "IRONLINK_COMMAND_TIMEOUT", def.Agent.CommandTimeout, "how long applying one command (or one state a resync re-applies) to Ironic and Placement may take before it fails with a timeout (at least 1s)")
	f.Duration(&o.Link.ResyncInterval, "resync-interval", "IRONLINK_RESYNC_INTERVAL", def.Link.ResyncInterval, "how often the desired quarantine/release state is re-applied to Ironic and Placement (also at every link start)")
}

// bindOperationFlags defines the operations' flags.
func bindOperationFlags(f *cli.Flags, o *app.Options, def app.Options) {
	f.Group("operations")
	f.String(&o.OperationsCloud, "operations-cloud", "IRONLINK_OPERATIONS_CLOUD", "", "cloud in the same clouds.yaml whose application credential runs operations (enrol, clean, deploy, Nova create; rules in deploy/openstack/operations-access-rules.yaml); empty: no operations")
	f.Int(&o.Operations.MaxConcurrent, "operations-concurrency", "IRONLINK_OPERATIONS_CONCURRENCY", def.Operations.MaxConcurrent, "operations reconciled at once; the others wait")
	f.Duration(&o.Operations.PollInterval, "operations-poll-interval", "IRONLINK_OPERATIONS_POLL_INTERVAL", def.Operations.PollInterval, "wait between two reads of a node while an operation waits for Ironic or Nova")
}

package main

import (
	"fmt"
	"os"
	"time"

	"github.com/ironlink/ironlink/hub/app"
	"github.com/ironlink/ironlink/hub/web"
	"github.com/ironlink/ironlink/internal/cli"
)

// The one place serve's (and validate's) flags are defined: each fills a
// field of app.Options, defaults to the value of app.Defaults and falls
// back to the environment variable it names (docs/reference/ironlink-hub.md).

// serveFlags is what serve's flags and environment fill: the hub's
// Options and the logger's settings.
type serveFlags struct {
	opts app.Options
	log  cli.LogOptions
	// migrate is --migrate (app.Options.SkipMigrate is its negation).
	migrate bool
	// commandPoolConns is --command-pool-conns, an int clamped into
	// app.Options.CommandPoolConns after parsing.
	commandPoolConns int
}

// parseServeFlags defines serve's flags on f (cli.NewCommand), parses args
// and returns the Options and log settings they give (unvalidated): the one
// loader serve and validate share. Its error is the command line's, then
// every environment variable that did not parse.
func parseServeFlags(f *cli.Flags, args []string) (app.Options, cli.LogOptions, error) {
	var s serveFlags
	def := app.Defaults()
	bindDatabaseAndLogFlags(f, &s.opts.DatabaseURL, &s.log)
	f.Bool(&s.migrate, "migrate", true, "apply database migrations before serving; --migrate=false when the migrate subcommand runs them (e.g. a Helm hook Job)")
	f.Int(&s.commandPoolConns, "command-pool-conns", "IRONLINK_HUB_COMMAND_POOL_CONNS", int(def.CommandPoolConns),
		"database connections reserved for the command path: quarantine, release, delivery, results")
	bindListenFlags(f, &s.opts, def)
	bindAuthFlags(f, &s.opts, def)
	bindLinkFlags(f, &s.opts, def)
	bindOperatorFlags(f, &s.opts, def)
	bindWebFlags(f, &s.opts.Web)
	if err := f.Parse(args); err != nil {
		return s.opts, s.log, err
	}
	s.opts.SkipMigrate = !s.migrate
	s.opts.CommandPoolConns = int32(min(max(s.commandPoolConns, -1), 1<<20))
	return s.opts, s.log, nil
}

// bindDatabaseAndLogFlags defines the flags serve and migrate share.
func bindDatabaseAndLogFlags(f *cli.Flags, databaseURL *string, l *cli.LogOptions) {
	f.Group("database and logging")
	f.String(databaseURL, "database-url", "DATABASE_URL", "", "PostgreSQL URL")
	l.Bind(f)
}

// bindListenFlags defines the listeners and the gRPC transport's flags.
func bindListenFlags(f *cli.Flags, o *app.Options, def app.Options) {
	f.Group("listeners and transport")
	hostname, _ := os.Hostname()
	f.String(&o.Listen, "listen", "IRONLINK_HUB_LISTEN", def.Listen, "gRPC listen address")
	f.String(&o.Replica, "replica", "IRONLINK_HUB_REPLICA", fmt.Sprintf("%s-%d", hostname, os.Getpid()), "name of this replica")
	f.String(&o.AdminAddr, "admin-addr", "IRONLINK_HUB_ADMIN_ADDR", app.DefaultAdminAddr, "plaintext HTTP listener for /metrics, /healthz and /readyz; empty for none")
	f.Bool(&o.AdminPprof, "admin-pprof", false, "also serve Go's profiler (net/http/pprof) under /debug/pprof/ on the admin listener")
	f.String(&o.TLSCert, "tls-cert", "IRONLINK_TLS_CERT", "", "server certificate PEM, reloaded on change (env IRONLINK_TLS_CERT; required unless --plaintext)")
	f.String(&o.TLSKey, "tls-key", "IRONLINK_TLS_KEY", "", "server private key PEM")
	f.String(&o.TLSClientCA, "tls-client-ca", "IRONLINK_TLS_CLIENT_CA", "", "CA bundle for client certificates: turns mutual TLS on, the certificate bound to the client id")
	f.Bool(&o.Plaintext, "plaintext", false, "serve without TLS (local development only)")
	f.Duration(&o.MaxConnectionAge, "max-connection-age", "IRONLINK_HUB_MAX_CONNECTION_AGE", def.MaxConnectionAge, "connections older than this are asked to reconnect, so satellites spread over replicas (0: never)")
	f.Duration(&o.KeepaliveTime, "keepalive-time", "IRONLINK_HUB_KEEPALIVE_TIME", def.KeepaliveTime, "ping an idle connection after this long")
	f.Duration(&o.KeepaliveTimeout, "keepalive-timeout", "IRONLINK_HUB_KEEPALIVE_TIMEOUT", def.KeepaliveTimeout, "drop a connection whose ping is not answered within this")
	f.Duration(&o.KeepaliveMinTime, "keepalive-min-time", "IRONLINK_HUB_KEEPALIVE_MIN_TIME", def.KeepaliveMinTime, "refuse clients that ping more often (must be ≤ the satellites' keepalive time)")
}

// bindAuthFlags defines client authentication's and the enrolment key's
// flags.
func bindAuthFlags(f *cli.Flags, o *app.Options, def app.Options) {
	f.Group("authentication")
	f.String(&o.RosterPath, "roster", "IRONLINK_HUB_ROSTER", "", "YAML roster of clients (satellites, operators) and their public keys; reloaded on SIGHUP and on change (env IRONLINK_HUB_ROSTER; required unless --no-auth)")
	f.Bool(&o.NoAuth, "no-auth", false, "turn client authentication off (local development only)")
	f.String(&o.Audience, "audience", "IRONLINK_HUB_AUDIENCE", def.Audience, "JWT audience clients must address")
	f.Duration(&o.MaxTokenLifetime, "max-token-lifetime", "IRONLINK_HUB_MAX_TOKEN_LIFETIME", def.MaxTokenLifetime, "refuse client assertions whose exp-iat is longer")
	f.String(&o.EnrolKeyFile, "enrol-key-file", "IRONLINK_HUB_ENROL_KEY_FILE", "",
		"file with the key (32 bytes, base64: openssl rand -base64 32; several, one per line, to rotate: the first seals) that seals ENROL BMC credentials into the database, the same on every replica; "+
			"empty: they stay in the memory of the replica that took the request (one replica only)")
}

// bindLinkFlags defines the satellite link's, the commands', the
// operations' and the history's flags.
func bindLinkFlags(f *cli.Flags, o *app.Options, def app.Options) {
	f.Group("satellite link, commands and history")
	f.Duration(&o.StaleAfter, "stale-after", "IRONLINK_HUB_STALE_AFTER", def.StaleAfter, "a site silent this long is UNREACHABLE")
	f.Duration(&o.HealthDefaultTTL, "health-default-ttl", "IRONLINK_HUB_HEALTH_DEFAULT_TTL", def.HealthDefaultTTL, "a health condition whose event sends no ttl turns Unknown/Stale after this long without a report")
	f.Float64(&o.HealthReporterRate, "health-reporter-rate", "IRONLINK_HUB_HEALTH_REPORTER_RATE", def.HealthReporterRate, "health events per second each reporter (client and agent) may send to HealthService before it is refused (ResourceExhausted, RetryInfo), so one flooding checker does not starve the others; -1: no limit")
	f.Int(&o.HealthReporterBurst, "health-reporter-burst", "IRONLINK_HUB_HEALTH_REPORTER_BURST", def.HealthReporterBurst, "health events a reporter may send at once before --health-reporter-rate applies")
	f.String(&o.HealthAgentTTL, "health-agent-ttl", "IRONLINK_HUB_HEALTH_AGENT_TTL", def.HealthAgentTTL, "per-agent health TTLs, agent=duration,... (overrides --health-default-ttl for that agent)")
	f.Duration(&o.HealthSweep, "health-sweep-interval", "IRONLINK_HUB_HEALTH_SWEEP_INTERVAL", def.HealthSweep, "how often this replica turns expired health conditions Unknown/Stale")
	f.Duration(&o.Link.HeartbeatInterval, "heartbeat-interval", "IRONLINK_HUB_HEARTBEAT_INTERVAL", def.Link.HeartbeatInterval, "hub → satellite heartbeat interval")
	f.Duration(&o.Link.LastSeenFlush, "last-seen-flush", "IRONLINK_HUB_LAST_SEEN_FLUSH", def.Link.LastSeenFlush, "how often this replica records all its links' last-seen times, in one statement (must be below --stale-after)")
	f.Duration(&o.Link.CommandSweep, "command-sweep", "IRONLINK_HUB_COMMAND_SWEEP", def.Link.CommandSweep, "how often each link looks for due commands without a notification")
	f.Duration(&o.Link.Delivery.ResendAfter, "command-resend-after", "IRONLINK_HUB_COMMAND_RESEND_AFTER", def.Link.Delivery.ResendAfter, "resend a command that got no result after this long")
	f.Duration(&o.Link.Delivery.FailureBackoff, "command-failure-backoff", "IRONLINK_HUB_COMMAND_FAILURE_BACKOFF", def.Link.Delivery.FailureBackoff, "first wait before a failed command is retried (doubles, capped at 5m)")
	ops, dops := &o.Link.Operations, def.Link.Operations
	f.Int(&ops.PerSiteLimit, "operations-per-site", "IRONLINK_HUB_OPERATIONS_PER_SITE", dops.PerSiteLimit, "operations RUNNING at once per site; more wait PENDING, visibly queued")
	f.Duration(&ops.ResendAfter, "operation-resend-after", "IRONLINK_HUB_OPERATION_RESEND_AFTER", dops.ResendAfter, "resend a RUNNING operation without progress for this long, as a new attempt (doubles while none comes)")
	f.Duration(&ops.MaxResendAfter, "operation-max-resend-after", "IRONLINK_HUB_OPERATION_MAX_RESEND_AFTER", dops.MaxResendAfter, "cap of the doubling wait between operation resends")
	f.Duration(&o.History.Retention, "history-retention", "IRONLINK_HUB_HISTORY_RETENTION", def.History.Retention, "drop condition and status history partitions wholly older than this (0: keep forever)")
	f.Duration(&o.History.Interval, "history-partition-interval", "IRONLINK_HUB_HISTORY_PARTITION_INTERVAL", def.History.Interval, "time range of each new history partition (at least 1h)")
}

// bindOperatorFlags defines the operator API's limits and the policy's
// flags.
func bindOperatorFlags(f *cli.Flags, o *app.Options, def app.Options) {
	f.Group("operator API and policy")
	f.Float64(&o.Throttle.Rate, "operator-rate", "IRONLINK_HUB_OPERATOR_RATE", def.Throttle.Rate, "operator API calls per second each client may make; 0: no limit")
	f.Int(&o.Throttle.Burst, "operator-burst", "IRONLINK_HUB_OPERATOR_BURST", def.Throttle.Burst, "operator API calls a client may make at once above --operator-rate")
	f.Int(&o.Admission.MaxLinkMessageBytes, "max-link-message-bytes", "IRONLINK_HUB_MAX_LINK_MESSAGE_BYTES", def.Admission.MaxLinkMessageBytes, "largest LinkService message accepted (bytes); larger: ResourceExhausted")
	f.Int(&o.Admission.MaxRequestBytes, "max-request-bytes", "IRONLINK_HUB_MAX_REQUEST_BYTES", def.Admission.MaxRequestBytes, "largest request of the operator services, health and reflection accepted (bytes); larger: ResourceExhausted")
	f.Int(&o.Admission.MaxConcurrentStreams, "max-concurrent-streams", "IRONLINK_HUB_MAX_CONCURRENT_STREAMS", def.Admission.MaxConcurrentStreams, "streams one connection may hold open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS)")
	f.Duration(&o.WatchSendTimeout, "watch-send-timeout", "IRONLINK_HUB_WATCH_SEND_TIMEOUT", def.WatchSendTimeout,
		"end a WatchFleet stream whose consumer has taken no message for this long (it fell behind) with ResourceExhausted WATCH_FELL_BEHIND naming the cursor to resume from")
	f.Int(&o.Throttle.MaxStreams, "operator-max-streams", "IRONLINK_HUB_OPERATOR_MAX_STREAMS", def.Throttle.MaxStreams, "streams one operator client may hold open at once; 0: no cap")
	f.String(&o.PolicyFile, "policy-file", "IRONLINK_HUB_POLICY_FILE", "",
		"YAML quarantine policy (the chart values' `policy` key); reloaded on SIGHUP and on change; empty: automatic quarantine off")
	f.String(&o.HardwareProfilesFile, "hardware-profiles-file", "IRONLINK_HUB_HARDWARE_PROFILES_FILE", "",
		"YAML hardware profiles (expected hardware per resource class or name pattern, docs/reference/conditions.md#hardwarematchesprofile); reloaded on SIGHUP and on change; empty: no HardwareMatchesProfile")
	f.String(&o.NovaTemplatesFile, "nova-templates-file", "IRONLINK_HUB_NOVA_TEMPLATES_FILE", "",
		"YAML named Nova create templates (image, flavor, key pair, user data, metadata per site, docs/reference/operations.md#nova-create-templates); reloaded on SIGHUP and on change; empty: none")
	f.Duration(&o.ValidationTimeout, "validation-timeout", "IRONLINK_HUB_VALIDATION_TIMEOUT", def.ValidationTimeout,
		"how long a validation run may wait for its hardware read and check results after it started; then it fails naming the missing checks")
	f.String(&o.Handoff.URL, "handoff-webhook-url", "IRONLINK_HUB_HANDOFF_WEBHOOK_URL", "",
		"http(s) URL that receives every repair handoff of the remediation ladders as a signed JSON POST, retried until 2xx; empty: no webhook")
	f.String(&o.Handoff.SecretFile, "handoff-webhook-secret-file", "IRONLINK_HUB_HANDOFF_WEBHOOK_SECRET_FILE", "",
		"file holding the HMAC-SHA256 key of the handoff webhook (at least 16 bytes; header X-Ironlink-Signature-256); required with --handoff-webhook-url")
	f.Duration(&o.Handoff.Timeout, "handoff-webhook-timeout", "IRONLINK_HUB_HANDOFF_WEBHOOK_TIMEOUT", 10*time.Second, "how long one handoff webhook attempt may take")
	f.String(&o.LabelsFile, "labels-file", "IRONLINK_HUB_LABELS_FILE", "",
		"YAML failure-domain labels by device or by site and name pattern, over the satellites' (docs/reference/labels.md); reloaded on SIGHUP and on change; empty: none")
	f.Duration(&o.PolicyInterval, "policy-interval", "IRONLINK_HUB_POLICY_INTERVAL", def.PolicyInterval, "how often the policy evaluator runs without a wake-up (on one replica at a time)")
	f.Duration(&o.PolicyCoalesce, "policy-coalesce", "IRONLINK_HUB_POLICY_COALESCE", def.PolicyCoalesce,
		"how long the policy evaluator waits after a device entered FAULTED or MAINTENANCE before its pass, so a burst is decided in one")
	f.Bool(&o.PolicyPollOnly, "policy-poll-only", false, "the policy evaluator runs every --policy-interval only, not woken when a device enters FAULTED or MAINTENANCE")
}

// bindWebFlags defines the fleet view's flags.
func bindWebFlags(f *cli.Flags, c *web.Config) {
	f.Group("fleet view (web)")
	f.String(&c.Addr, "web-addr", "IRONLINK_HUB_WEB_ADDR", "", "fleet view listen address, host:port or unix:PATH; empty: off")
	f.String(&c.Auth, "web-auth", "IRONLINK_HUB_WEB_AUTH", web.AuthMTLS,
		"fleet view authentication: mtls (client certificate over an operator's roster key) or proxy (trusted proxy header)")
	f.String(&c.TrustedProxies, "web-trusted-proxies", "IRONLINK_HUB_WEB_TRUSTED_PROXIES", "",
		"comma-separated proxy addresses or prefixes whose user header is believed (proxy mode on TCP)")
	f.String(&c.UserHeader, "web-user-header", "IRONLINK_HUB_WEB_USER_HEADER", web.DefaultUserHeader, "header naming the roster client id in proxy mode")
}

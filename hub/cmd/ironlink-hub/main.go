// Command ironlink-hub serves the ironlink hub: the satellite link and the
// operator API, over one PostgreSQL database.
//
//	ironlink-hub [serve] [flags]   run the hub (migrates first)
//	ironlink-hub validate [flags]  check serve's configuration (roster, TLS files) and exit
//	ironlink-hub migrate [flags]   apply database migrations and exit
//	ironlink-hub keygen ...        create a client key pair, print its roster entry
//	ironlink-hub token ...         mint a short-lived client assertion (for grpcurl)
//	ironlink-hub dev-pki ...       create a throwaway CA and certificates (development)
//	ironlink-hub web-proxy ...     the demo's token proxy in front of the fleet view
//	ironlink-hub web-cert ...      a client certificate over an operator key (fleet view, mtls)
//	ironlink-hub version
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

	"github.com/ironlink/ironlink/hub/app"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/web"
	"github.com/ironlink/ironlink/internal/cli"
	"github.com/ironlink/ironlink/internal/version"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "ironlink-hub:", err)
		os.Exit(1)
	}
}

// run runs the subcommand in args; serve's and migrate's usage go to stderr.
func run(args []string, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "keygen":
			return runKeygen(args[1:])
		case "token":
			return runToken(args[1:])
		case "dev-pki":
			return runDevPKI(args[1:])
		case "web-proxy":
			return runWebProxy(args[1:], stderr)
		case "web-cert":
			return runWebCert(args[1:], stderr)
		}
	}
	if len(args) > 0 {
		switch args[0] {
		case "version":
			fmt.Println(version.String())
			return nil
		case "migrate":
			return runMigrate(args[1:], stderr)
		case "validate":
			return runValidate(args[1:], os.Stdout, stderr)
		case "serve":
			args = args[1:]
		}
	}
	fs := flag.NewFlagSet("ironlink-hub serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usage(fs, "ironlink-hub [serve] [flags]\n       ironlink-hub validate|migrate|keygen|token|dev-pki|web-proxy|web-cert|version ... (each with -h)")
	cfg, logLevel, logFormat, err := parseServeFlags(fs, args)
	if err != nil {
		return err
	}
	log, err := cli.NewLogger(logLevel, logFormat)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return app.Run(ctx, cfg, log)
}

// parseServeFlags defines serve's flags on fs (their defaults are
// app.Defaults', overridden by the environment variables named) and parses
// args: the one loader serve and validate share. It returns the unvalidated
// configuration and the log settings.
func parseServeFlags(fs *flag.FlagSet, args []string) (cfg app.Config, logLevel, logFormat string, err error) {
	def := app.Defaults()
	hostname, _ := os.Hostname()
	addMigrateFlags(fs, &cfg.DatabaseURL, &logLevel, &logFormat)
	fs.StringVar(&cfg.Listen, "listen", cli.Env("IRONLINK_HUB_LISTEN", def.Listen), "gRPC listen address (env IRONLINK_HUB_LISTEN)")
	fs.StringVar(&cfg.Replica, "replica", cli.Env("IRONLINK_HUB_REPLICA", fmt.Sprintf("%s-%d", hostname, os.Getpid())), "name of this replica (env IRONLINK_HUB_REPLICA)")
	fs.StringVar(&cfg.RosterPath, "roster", cli.Env("IRONLINK_HUB_ROSTER", ""), "YAML roster of clients (satellites, operators) and their public keys; reloaded on SIGHUP and on change (env IRONLINK_HUB_ROSTER; required unless --no-auth)")
	fs.BoolVar(&cfg.NoAuth, "no-auth", false, "turn client authentication off (local development only)")
	fs.StringVar(&cfg.Audience, "audience", cli.Env("IRONLINK_HUB_AUDIENCE", def.Audience), "JWT audience clients must address (env IRONLINK_HUB_AUDIENCE)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", cli.Env("IRONLINK_TLS_CERT", ""), "server certificate PEM, reloaded on change (env IRONLINK_TLS_CERT; required unless --plaintext)")
	fs.StringVar(&cfg.TLSKey, "tls-key", cli.Env("IRONLINK_TLS_KEY", ""), "server private key PEM (env IRONLINK_TLS_KEY)")
	fs.StringVar(&cfg.TLSClientCA, "tls-client-ca", cli.Env("IRONLINK_TLS_CLIENT_CA", ""), "CA bundle for client certificates: turns mutual TLS on, the certificate bound to the client id (env IRONLINK_TLS_CLIENT_CA)")
	fs.BoolVar(&cfg.Plaintext, "plaintext", false, "serve without TLS (local development only)")
	fs.StringVar(&cfg.AdminAddr, "admin-addr", cli.Env("IRONLINK_HUB_ADMIN_ADDR", app.DefaultAdminAddr), "plaintext HTTP listener for /metrics, /healthz and /readyz; empty for none (env IRONLINK_HUB_ADMIN_ADDR)")
	poolConns, perr := strconv.Atoi(cli.Env("IRONLINK_HUB_COMMAND_POOL_CONNS", strconv.Itoa(int(def.CommandPoolConns))))
	if perr != nil {
		err = fmt.Errorf("IRONLINK_HUB_COMMAND_POOL_CONNS: %w", perr)
	}
	fs.IntVar(&poolConns, "command-pool-conns", poolConns, "database connections reserved for the command path: quarantine, release, delivery, results (env IRONLINK_HUB_COMMAND_POOL_CONNS)")
	migrate := fs.Bool("migrate", true, "apply database migrations before serving; --migrate=false when the migrate subcommand runs them (e.g. a Helm hook Job)")
	web.AddFlags(fs, &cfg.Web)
	if terr := addThrottleFlags(fs, &cfg.Throttle, def.Throttle); terr != nil {
		err = terr
	}
	fs.StringVar(&cfg.EnrolKeyFile, "enrol-key-file", cli.Env("IRONLINK_HUB_ENROL_KEY_FILE", ""),
		"file with the key (32 bytes, base64: openssl rand -base64 32; several, one per line, to rotate: the first seals) that seals ENROL BMC credentials into the database, the same on every replica; "+
			"empty: they stay in the memory of the replica that took the request (one replica only) (env IRONLINK_HUB_ENROL_KEY_FILE)")
	if oerr := addOperationFlags(fs, &cfg.Link.Operations, def.Link.Operations); oerr != nil && err == nil {
		err = oerr
	}
	if perr := addPolicyFlags(fs, &cfg, def); perr != nil && err == nil {
		err = perr
	}
	durations := []struct {
		p    *time.Duration
		name string
		env  string
		def  time.Duration
		help string
	}{
		{&cfg.MaxTokenLifetime, "max-token-lifetime", "IRONLINK_HUB_MAX_TOKEN_LIFETIME", def.MaxTokenLifetime, "refuse client assertions whose exp-iat is longer"},
		{&cfg.StaleAfter, "stale-after", "IRONLINK_HUB_STALE_AFTER", def.StaleAfter, "a site silent this long is UNREACHABLE"},
		{&cfg.Link.HeartbeatInterval, "heartbeat-interval", "IRONLINK_HUB_HEARTBEAT_INTERVAL", def.Link.HeartbeatInterval, "hub → satellite heartbeat interval"},
		{&cfg.Link.CommandSweep, "command-sweep", "IRONLINK_HUB_COMMAND_SWEEP", def.Link.CommandSweep, "how often each link looks for due commands without a notification"},
		{&cfg.Link.Delivery.ResendAfter, "command-resend-after", "IRONLINK_HUB_COMMAND_RESEND_AFTER", def.Link.Delivery.ResendAfter, "resend a command that got no result after this long"},
		{&cfg.MaxConnectionAge, "max-connection-age", "IRONLINK_HUB_MAX_CONNECTION_AGE", def.MaxConnectionAge, "connections older than this are asked to reconnect, so satellites spread over replicas (0: never)"},
		{&cfg.KeepaliveTime, "keepalive-time", "IRONLINK_HUB_KEEPALIVE_TIME", def.KeepaliveTime, "ping an idle connection after this long"},
		{&cfg.KeepaliveTimeout, "keepalive-timeout", "IRONLINK_HUB_KEEPALIVE_TIMEOUT", def.KeepaliveTimeout, "drop a connection whose ping is not answered within this"},
		{&cfg.KeepaliveMinTime, "keepalive-min-time", "IRONLINK_HUB_KEEPALIVE_MIN_TIME", def.KeepaliveMinTime, "refuse clients that ping more often (must be ≤ the satellites' keepalive time)"},
		{&cfg.History.Retention, "history-retention", "IRONLINK_HUB_HISTORY_RETENTION", def.History.Retention, "drop condition and status history partitions wholly older than this (0: keep forever)"},
		{&cfg.History.Interval, "history-partition-interval", "IRONLINK_HUB_HISTORY_PARTITION_INTERVAL", def.History.Interval, "time range of each new history partition (at least 1h)"},
		{&cfg.Link.LastSeenFlush, "last-seen-flush", "IRONLINK_HUB_LAST_SEEN_FLUSH", def.Link.LastSeenFlush, "how often this replica records all its links' last-seen times, in one statement (must be below --stale-after)"},
		{&cfg.Link.Delivery.FailureBackoff, "command-failure-backoff", "IRONLINK_HUB_COMMAND_FAILURE_BACKOFF", def.Link.Delivery.FailureBackoff, "first wait before a failed command is retried (doubles, capped at 5m)"},
	}
	for _, d := range durations {
		v, derr := cli.EnvDuration(d.env, d.def)
		if derr != nil && err == nil {
			err = derr
		}
		fs.DurationVar(d.p, d.name, v, d.help+" (env "+d.env+")")
	}
	if perr := fs.Parse(args); perr != nil {
		return cfg, "", "", perr
	}
	if err != nil {
		return cfg, "", "", err
	}
	if fs.NArg() > 0 {
		return cfg, "", "", fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	cfg.SkipMigrate = !*migrate
	cfg.CommandPoolConns = int32(min(max(poolConns, -1), 1<<20))
	return cfg, logLevel, logFormat, nil
}

// runValidate implements `ironlink-hub validate`: the flags and environment
// of serve, loaded and checked as serve would (app.Check: settings, roster,
// TLS files, database URL syntax) without serving. It prints one line per
// problem to stderr and returns cli.ErrInvalid, or prints one OK line to stdout.
func runValidate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ironlink-hub validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usage(fs, "ironlink-hub validate [serve flags]\n\nChecks the configuration serve would run with (flags and environment, the roster,\nthe TLS files, the database URL's syntax; no connection is made) and exits 1 when\nanything is wrong.")
	cfg, logLevel, logFormat, err := parseServeFlags(fs, args)
	if err != nil {
		return err
	}
	problems := cli.Problems(app.Check(cfg))
	if _, lerr := cli.NewLogger(logLevel, logFormat); lerr != nil {
		problems = append(problems, lerr.Error())
	}
	if err := cli.ReportProblems(stderr, problems); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "ironlink-hub: configuration OK")
	return nil
}

// runMigrate implements `ironlink-hub migrate`: apply pending migrations
// and exit. It takes only the flags that matter to it.
func runMigrate(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("ironlink-hub migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usage(fs, "ironlink-hub migrate [--database-url URL] [--log-level L] [--log-format F]")
	var databaseURL, logLevel, logFormat string
	addMigrateFlags(fs, &databaseURL, &logLevel, &logFormat)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("migrate: unexpected arguments %v", fs.Args())
	}
	if databaseURL == "" {
		return errors.New("database URL is required (--database-url or DATABASE_URL)")
	}
	log, err := cli.NewLogger(logLevel, logFormat)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	applied, err := store.Migrate(ctx, databaseURL)
	if err != nil {
		return err
	}
	log.Info("migrations done", "applied", applied)
	return nil
}

// addMigrateFlags defines the flags serve and migrate share.
func addMigrateFlags(fs *flag.FlagSet, databaseURL, logLevel, logFormat *string) {
	fs.StringVar(databaseURL, "database-url", cli.Env("DATABASE_URL", ""), "PostgreSQL URL (env DATABASE_URL)")
	fs.StringVar(logLevel, "log-level", cli.Env("IRONLINK_LOG_LEVEL", "info"), "debug, info, warn or error (env IRONLINK_LOG_LEVEL)")
	fs.StringVar(logFormat, "log-format", cli.Env("IRONLINK_LOG_FORMAT", "text"), "text or json (env IRONLINK_LOG_FORMAT)")
}

// usage prints a usage line and the flag defaults of fs to fs's output. The
// heading says that flags fall back to an environment variable only when
// one of them does, and names which.
func usage(fs *flag.FlagSet, line string) func() {
	return func() {
		w := fs.Output()
		heading := "flags:"
		withEnv, all := 0, 0
		fs.VisitAll(func(f *flag.Flag) {
			all++
			if strings.Contains(f.Usage, "(env ") {
				withEnv++
			}
		})
		switch {
		case withEnv > 0 && withEnv == all:
			heading = "flags (each also read from the environment variable shown; the flag wins):"
		case withEnv > 0:
			heading = "flags (those showing an environment variable also read it; the flag wins):"
		}
		fmt.Fprintf(w, "usage: %s\n\n%s\n", line, heading)
		fs.PrintDefaults()
	}
}

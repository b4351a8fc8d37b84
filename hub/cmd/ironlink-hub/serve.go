package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/ironlink/ironlink/hub/app"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/cli"
)

// serveUsage is the usage line of serve, which also names the subcommands.
const serveUsage = "ironlink-hub [serve] [flags]\n       ironlink-hub validate|migrate|keygen|token|dev-pki|web-proxy|web-cert|version ... (each with -h)"

// runServe implements `ironlink-hub [serve]`: flags and environment →
// app.Options → Validate → app.Run until SIGINT or SIGTERM. Usage goes to
// stderr.
func runServe(args []string, stderr io.Writer) error {
	opts, lf, err := parseServeFlags(cli.NewCommand("ironlink-hub serve", serveUsage, stderr), args)
	if err != nil {
		return err
	}
	return cli.RunUntilSignal(lf, opts.Validate, app.Run)
}

// runValidate implements `ironlink-hub validate`: the flags and environment
// of serve, loaded and checked as serve would (app.Check: settings, roster,
// TLS files, database URL syntax) without serving. It prints one line per
// problem (a flag or environment value that does not parse, or what Check
// finds) to stderr and returns cli.ErrInvalid, or prints one OK line to
// stdout.
func runValidate(args []string, stdout, stderr io.Writer) error {
	f := cli.NewCommand("ironlink-hub validate", "ironlink-hub validate [serve flags]\n\nChecks the configuration serve would run with (flags and environment, the roster,\nthe TLS files, the database URL's syntax; no connection is made) and exits 1 when\nanything is wrong.", stderr)
	opts, lf, err := parseServeFlags(f, args)
	return cli.CheckConfig(stdout, stderr, err, lf, func() (string, error) {
		return "ironlink-hub: configuration OK", app.Check(opts)
	})
}

// runMigrate implements `ironlink-hub migrate`: apply pending migrations
// and exit. It takes only the flags that matter to it.
func runMigrate(args []string, stderr io.Writer) error {
	f := cli.NewCommand("ironlink-hub migrate", "ironlink-hub migrate [--database-url URL] [--log-level L] [--log-format F]", stderr)
	var databaseURL string
	var lf cli.LogOptions
	bindDatabaseAndLogFlags(f, &databaseURL, &lf)
	if err := f.Parse(args); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if databaseURL == "" {
		return errors.New("database URL is required (--database-url or DATABASE_URL)")
	}
	log, err := lf.Logger()
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

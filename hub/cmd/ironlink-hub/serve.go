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
// TLS files, database URL syntax, the policy file) without serving. It
// prints one "warning: " line per thing that is valid but cannot work as
// written (app.Warnings: a policy hold-down shorter than --stale-after, a
// maintenance window that never opens again) to stderr; then one line per
// problem (a flag or environment value that does not parse, or what Check
// finds) to stderr and returns cli.ErrInvalid, or one OK line to stdout
// (warnings do not fail it: serve starts with them, logging them).
func runValidate(args []string, stdout, stderr io.Writer) error {
	f := cli.NewCommand("ironlink-hub validate", "ironlink-hub validate [serve flags]\n\nChecks the configuration serve would run with (flags and environment, the roster,\nthe TLS files, the policy file, the database URL's syntax; no connection is made)\nand exits 1 when anything is wrong. What is valid but cannot work as written (a\npolicy hold-down shorter than --stale-after, a window that never opens) is printed\nas a warning and does not change the exit status.", stderr)
	opts, lf, err := parseServeFlags(f, args)
	return cli.CheckConfig(stdout, stderr, err, lf, func() (string, error) {
		ok := "ironlink-hub: configuration OK"
		ws := app.Warnings(opts)
		for _, w := range ws {
			fmt.Fprintln(stderr, "warning: --policy-file: "+w)
		}
		switch len(ws) {
		case 0:
		case 1:
			ok += " (1 warning)"
		default:
			ok += fmt.Sprintf(" (%d warnings)", len(ws))
		}
		return ok, app.Check(opts)
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

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/ironlink/ironlink/internal/cli"
	"github.com/ironlink/ironlink/internal/logkey"
	"github.com/ironlink/ironlink/satellite/app"
)

// runUsage is the usage line of a run, which also names the subcommands.
const runUsage = "ironlink-satellite [flags]\n       ironlink-satellite validate [flags]   check the configuration and exit\n       ironlink-satellite version"

// runSatellite runs the satellite: flags and environment → app.Options →
// Validate → app.Run until SIGINT or SIGTERM. Usage goes to stderr.
func runSatellite(args []string, stderr io.Writer) error {
	opts, lf, err := parseFlags(cli.NewCommand("ironlink-satellite", runUsage, stderr), args)
	if err != nil {
		return err
	}
	return cli.RunUntilSignal(lf, opts.Validate, func(ctx context.Context, cfg app.Config, log *slog.Logger) error {
		err := app.Run(ctx, cfg, log.With(logkey.Site, cfg.Site))
		if err == nil {
			log.Info("satellite stopped", logkey.Site, cfg.Site)
		}
		return err
	})
}

// runValidate implements `ironlink-satellite validate`: the flags and
// environment of a run, loaded and checked as a run would (app.Check: the
// settings, the client key and TLS files, the selector, clouds.yaml and
// its auth options) without contacting the hub or OpenStack. It prints one
// line per problem to stderr and returns cli.ErrInvalid, or one OK line (with
// the cloud's auth method) to stdout.
func runValidate(args []string, stdout, stderr io.Writer) error {
	f := cli.NewCommand("ironlink-satellite validate", "ironlink-satellite validate [flags]\n\nChecks the configuration a run would use (flags and environment, the client key and\nTLS files, the validation-pool selector, clouds.yaml and its auth options; nothing is\ncontacted) and exits 1 when anything is wrong. Flags as for a run.", stderr)
	opts, lf, err := parseFlags(f, args)
	return cli.CheckConfig(stdout, stderr, err, lf, func() (string, error) {
		method, err := app.Check(opts)
		return fmt.Sprintf("ironlink-satellite: configuration OK (site %s, cloud %q, %s)", opts.Site, opts.OpenStack.Cloud, method), err
	})
}

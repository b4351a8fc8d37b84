package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/ironlink/ironlink/internal/cli"
	"github.com/ironlink/ironlink/internal/logkey"
	"github.com/ironlink/ironlink/satellite/app"
)

// runUsage is the usage line of a run, which also names the subcommands.
const runUsage = "ironlink-satellite [flags]\n       ironlink-satellite validate [flags]   check the configuration and exit\n       ironlink-satellite version"

// runSatellite runs the satellite: flags and environment → app.Options →
// Validate → app.Run until SIGINT or SIGTERM. Usage goes to stderr.
func runSatellite(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("ironlink-satellite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts, lf, err := parseFlags(fs, runUsage, args)
	if err != nil {
		return err
	}
	log, err := lf.Logger()
	if err != nil {
		return err
	}
	cfg, err := opts.Validate()
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

// runValidate implements `ironlink-satellite validate`: the flags and
// environment of a run, loaded and checked as a run would (app.Check: the
// settings, the client key and TLS files, the selector, clouds.yaml and
// its auth options) without contacting the hub or OpenStack. It prints one
// line per problem to stderr and returns cli.ErrInvalid, or one OK line (with
// the cloud's auth method) to stdout.
func runValidate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ironlink-satellite validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts, lf, err := parseFlags(fs, "ironlink-satellite validate [flags]\n\nChecks the configuration a run would use (flags and environment, the client key and\nTLS files, the validation-pool selector, clouds.yaml and its auth options; nothing is\ncontacted) and exits 1 when anything is wrong. Flags as for a run.", args)
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	var problems []string
	var method string
	if err != nil {
		problems = cli.Problems(err)
	} else {
		m, cerr := app.Check(opts)
		method = string(m)
		problems = cli.Problems(cerr)
		if _, lerr := lf.Logger(); lerr != nil {
			problems = append(problems, lerr.Error())
		}
	}
	if err := cli.ReportProblems(stderr, problems); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ironlink-satellite: configuration OK (site %s, cloud %q, %s)\n", opts.Site, opts.OpenStack.Cloud, method)
	return nil
}

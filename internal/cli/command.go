package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// NewCommand returns the Flags of the command or subcommand name (for
// example "ironlink-hub token"): a flag.FlagSet that returns its errors
// (flag.ContinueOnError) and prints them and the usage to stderr, the usage
// starting "usage: " line (see [Flags.Usage]).
func NewCommand(name, line string, stderr io.Writer) *Flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := NewFlags(fs)
	fs.Usage = f.Usage(line)
	return f
}

// RunUntilSignal is the serve path both binaries share: it builds the logger lf describes, turns the options
// into the immutable Config with validate (an Options' Validate method) and
// calls run with them and a context that SIGINT or SIGTERM cancels. It
// returns the logger's or validate's error before run starts, else run's.
func RunUntilSignal[C any](lf LogOptions, validate func() (C, error), run func(ctx context.Context, cfg C, log *slog.Logger) error) error {
	log, err := lf.Logger()
	if err != nil {
		return err
	}
	cfg, err := validate()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, cfg, log)
}

// CheckConfig is the body of both binaries' validate subcommand, after the
// flags and environment were parsed with parseErr as the result. For -h
// (flag.ErrHelp) it returns parseErr. Otherwise it gathers one problem per
// error of parseErr or, when the command line parsed, of check and of the
// log settings lf; with any, it prints them (ReportProblems) to stderr and
// returns ErrInvalid, else it prints check's ok line to stdout and returns
// nil.
func CheckConfig(stdout, stderr io.Writer, parseErr error, lf LogOptions, check func() (ok string, err error)) error {
	if errors.Is(parseErr, flag.ErrHelp) {
		return parseErr
	}
	if parseErr != nil { // a flag or an environment variable that does not parse
		return ReportProblems(stderr, Problems(parseErr))
	}
	ok, err := check()
	problems := Problems(err)
	if _, lerr := lf.Logger(); lerr != nil {
		problems = append(problems, lerr.Error())
	}
	if err := ReportProblems(stderr, problems); err != nil {
		return err
	}
	fmt.Fprintln(stdout, ok)
	return nil
}

// Exit ends the process of the command name after its run returned err:
// nothing for nil (main returns), status 0 for flag.ErrHelp (the usage was
// printed), else "name: err" on stderr and status 1.
func Exit(name string, err error) {
	if err == nil {
		return
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	fmt.Fprintln(os.Stderr, name+":", err)
	os.Exit(1)
}

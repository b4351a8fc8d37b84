package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ironlink/ironlink/gen/datamodels"
	"github.com/ironlink/ironlink/internal/healthsim"
)

// healthMain runs `ironlink-openstacksim health ARGS` and exits 1 when it
// fails (0 for -h).
func healthMain(args []string) {
	if err := runHealth(args, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "ironlink-openstacksim:", err)
		os.Exit(1)
	}
}

// runHealth is `ironlink-openstacksim health`: a health-checker simulator
// that sends NVSentinel-shaped events for the named nodes through a
// satellite's local health door, in one batch, and prints one line per
// event once the hub committed them.
func runHealth(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "the satellite's --health-socket (required)")
	fault := fs.String("fault", "xid79", "the fault to report (--list names them)")
	healthy := fs.Bool("healthy", false, "report the check's all-clear instead (clears the condition)")
	gpu := fs.Int("gpu", 3, "the GPU index the event names")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to wait for the hub's commit")
	list := fs.Bool("list", false, "print the faults this simulator knows and exit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ironlink-openstacksim health --socket PATH [--fault NAME] [--healthy] [--gpu N] NODE...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *list {
		for _, f := range healthsim.Catalog {
			fmt.Fprintf(stdout, "%-8s %-4s %s/%s code %s, %s, %s: %s\n", f.Name, f.ComponentClass, f.ComponentClass, f.Check,
				f.Code, fatality(f.Fatal), f.Action, f.Message)
		}
		return nil
	}
	if *socket == "" || fs.NArg() == 0 {
		fs.Usage()
		return errors.New("health: --socket and at least one NODE are required")
	}
	f, err := healthsim.Lookup(*fault)
	if err != nil {
		return fmt.Errorf("health: --fault: %w", err)
	}
	door, err := healthsim.Dial(*socket)
	if err != nil {
		return err
	}
	defer func() { _ = door.Close() }()
	now := time.Now()
	var events []*datamodels.HealthEvent
	for _, node := range fs.Args() {
		events = append(events, f.Event(node, *gpu, now, *healthy))
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := door.Send(ctx, events...); err != nil {
		return fmt.Errorf("health: %w", err)
	}
	for _, e := range events {
		what := fmt.Sprintf("%s, %s", strings.Join(e.GetErrorCode(), ","), fatality(e.GetIsFatal()))
		if e.GetIsHealthy() {
			what = "healthy"
		}
		fmt.Fprintf(stdout, "%s: %s/%s %s (%s) committed by the hub\n", e.GetNodeName(), e.GetComponentClass(), e.GetCheckName(), what, e.GetMessage())
	}
	return nil
}

// fatality is "fatal" or "warning".
func fatality(fatal bool) string {
	if fatal {
		return "fatal"
	}
	return "warning"
}

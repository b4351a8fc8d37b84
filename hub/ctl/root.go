package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// Options are the process-level dependencies of the CLI; the zero value of
// a field means the real thing (os.Stdout, os.Getenv, time.Now, ...).
// Tests set them to run the command tree in-process.
type Options struct {
	Stdout, Stderr io.Writer
	// Stdin answers confirmation prompts (bulk quarantine/release without
	// --yes); default os.Stdin.
	Stdin io.Reader
	// Getenv reads the environment.
	Getenv func(string) string
	// Now is the clock ages are measured against.
	Now func() time.Time
	// Age formats the age of a time (default: kubectl-like "5s", "3m12s",
	// "4h", "2d"); tests replace it to get stable golden output.
	Age func(t time.Time) string
	// PollInterval is how often --wait polls a command (default 1 s);
	// --watch polls every --interval.
	PollInterval time.Duration
}

func (o *Options) defaults() {
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Stdin == nil {
		o.Stdin = os.Stdin
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Age == nil {
		o.Age = func(t time.Time) string { return humanAge(o.Now(), t) }
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
}

// app is one invocation: options, the root's flags and, once needed, the
// hub connection.
type app struct {
	opts    Options
	flags   connFlags
	timeout time.Duration
	cl      *client
	// ageAt, when set (describe --as-of), is the moment ages are counted
	// from instead of now.
	ageAt *time.Time
}

// connectFor checks -o output against the formats a command allows
// (checkOutput) before it connects (connect): a bad -o fails without
// dialling.
func (a *app) connectFor(output string, allowed ...string) (*client, error) {
	if err := checkOutput(output, allowed...); err != nil {
		return nil, err
	}
	return a.connect()
}

// connect resolves the settings and dials the hub once per invocation.
func (a *app) connect() (*client, error) {
	if a.cl != nil {
		return a.cl, nil
	}
	s, err := resolveSettings(a.flags, a.opts.Getenv)
	if err != nil {
		return nil, err
	}
	cc, err := dial(s)
	if err != nil {
		return nil, err
	}
	a.cl = &client{settings: s, fleet: ironlinkv1.NewFleetServiceClient(cc), ops: ironlinkv1.NewOperationServiceClient(cc),
		policy: ironlinkv1.NewPolicyServiceClient(cc), bulk: ironlinkv1.NewBulkServiceClient(cc), timeout: a.timeout, close: cc.Close,
		remediation: ironlinkv1.NewRemediationServiceClient(cc), hw: ironlinkv1.NewHardwareServiceClient(cc)}
	return a.cl, nil
}

func (a *app) closeClient() {
	if a.cl != nil {
		_ = a.cl.close()
	}
}

// NewRootCommand returns the `ironlink` command tree. Run it with Execute
// (which maps errors to exit codes) or with cobra directly.
func NewRootCommand(opts Options) *cobra.Command {
	root, _ := newRoot(opts)
	return root
}

// newRoot builds the command tree and the app it runs on (whose hub
// connection the caller closes).
func newRoot(opts Options) (*cobra.Command, *app) {
	opts.defaults()
	a := &app{opts: opts}
	root := &cobra.Command{
		Use:   "ironlink",
		Short: "Look after an ironlink fleet: what is broken and why, quarantine and release",
		Long: `ironlink talks to an ironlink hub over its public gRPC API (FleetService), as
the operator client of the current context (see "ironlink config --help").
Every call signs a fresh short-lived client assertion with the context's key:
there are no tokens to handle.

Devices are named by their Ironic node name, by SITE/NAME when a name is used
at more than one site, or by UUID.

` + exitCodesHelp,
		Example: `  # what is broken now, and why
  ironlink get devices --status faulted,maintenance
  # take a machine away from customers and be sure it happened
  ironlink quarantine node-007 --reason "GPU 3 throws Xid 79" --wait
  # give it back
  ironlink release node-007 --reason "GPU replaced" --wait
  # which site stopped reporting
  ironlink get sites
  # everything about one machine
  ironlink describe device node-007`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(opts.Stdout)
	root.SetErr(opts.Stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&a.flags.config, "config", "", "config file (default $"+EnvConfig+", else ~/.config/ironlink/config.yaml)")
	pf.StringVar(&a.flags.context, "context", "", "context to use instead of current-context ($"+EnvContext+")")
	pf.StringVar(&a.flags.hub, "hub", "", "hub address host:port, overriding the context ($"+EnvHub+")")
	pf.StringVar(&a.flags.ca, "ca", "", "CA bundle (PEM) that signs the hub's certificate ($"+EnvCA+")")
	pf.StringVar(&a.flags.clientID, "client-id", "", "operator client id in the hub's roster ($"+EnvClientID+")")
	pf.StringVar(&a.flags.key, "key", "", "private key (PKCS#8 PEM) that signs the client assertions ($"+EnvKey+")")
	pf.StringVar(&a.flags.audience, "audience", "", "the hub's audience ($"+EnvAudience+", default "+DefaultAudience+")")
	pf.StringVar(&a.flags.serverName, "server-name", "", "name to verify in the hub's certificate (default: the host of --hub)")
	pf.BoolVar(&a.flags.plaintext, "plaintext", false, "no TLS: only for a development hub started with --plaintext")
	pf.BoolVar(&a.flags.noAuth, "no-auth", false, "send no client assertion: only for a development hub started with --no-auth")
	pf.DurationVar(&a.timeout, "request-timeout", 30*time.Second, "time limit of each call to the hub")
	_ = root.RegisterFlagCompletionFunc("context", a.completeContexts)

	root.AddCommand(a.newGetCommand(), a.newDescribeCommand(),
		a.newImpairCommand(true), a.newImpairCommand(false), a.newOfferCommand(), a.newConfigCommand(), a.newOpCommand(),
		a.newResolveCommand(true), a.newResolveCommand(false), a.newWatchCommand(),
		a.newHoldsCommand(), a.newPolicyCommand(), a.newRetryCommand(), a.newEventsCommand(),
		a.newExplainCommand(), a.newHandoffsCommand(),
		a.newDriftCommand(), a.newHardwareCommand(), a.newValidateCommand())
	return root, a
}

// Execute runs the command tree with args (without the program name) and
// returns the process exit code, printing errors as "error: ..." on stderr.
func Execute(ctx context.Context, opts Options, args []string) int {
	opts.defaults()
	root, a := newRoot(opts)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	a.closeClient()
	if err == nil {
		return ExitOK
	}
	var e *Error
	if !errors.As(err, &e) {
		// cobra's own errors: unknown command or flag, wrong arguments
		msg := err.Error()
		if !strings.HasSuffix(msg, ".") {
			msg += ` (see "ironlink --help")`
		}
		e = &Error{Code: ExitUsage, Msg: msg}
	}
	fmt.Fprintf(opts.Stderr, "error: %s\n", e.Msg)
	return e.Code
}

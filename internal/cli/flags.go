package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
)

// Flags defines a command's flags on a flag.FlagSet, each with its default
// overridden by an environment variable when one is named and set
// (non-empty), in groups that [Flags.Usage] prints in order. An environment
// value that does not parse is kept as an error that [Flags.Parse] returns
// after the command line parsed; the flag then starts from its default.
type Flags struct {
	fs     *flag.FlagSet
	groups []flagGroup
	errs   []error
}

// flagGroup is a heading of the usage text and the flags under it, in the
// order they were defined.
type flagGroup struct {
	title string
	names []string
}

// NewFlags returns Flags defining on fs, with no group yet (flags defined
// before the first [Flags.Group] are printed first, without a heading).
func NewFlags(fs *flag.FlagSet) *Flags {
	return &Flags{fs: fs, groups: []flagGroup{{}}}
}

// FlagSet returns the flag.FlagSet the flags are defined on.
func (f *Flags) FlagSet() *flag.FlagSet { return f.fs }

// Group starts a group: the flags defined next are printed under title.
func (f *Flags) Group(title string) { f.groups = append(f.groups, flagGroup{title: title}) }

// String defines a string flag falling back to env ("" for none).
func (f *Flags) String(p *string, name, env, def, usage string) {
	f.fs.StringVar(p, name, envValue(f, env, def, func(s string) (string, error) { return s, nil }), withEnv(usage, env))
	f.add(name)
}

// Bool defines a boolean flag; booleans read no environment variable.
func (f *Flags) Bool(p *bool, name string, def bool, usage string) {
	f.fs.BoolVar(p, name, def, usage)
	f.add(name)
}

// Int defines an integer flag falling back to env ("" for none).
func (f *Flags) Int(p *int, name, env string, def int, usage string) {
	f.fs.IntVar(p, name, envValue(f, env, def, strconv.Atoi), withEnv(usage, env))
	f.add(name)
}

// Float64 defines a floating-point flag falling back to env ("" for none).
func (f *Flags) Float64(p *float64, name, env string, def float64, usage string) {
	parse := func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }
	f.fs.Float64Var(p, name, envValue(f, env, def, parse), withEnv(usage, env))
	f.add(name)
}

// Duration defines a duration flag (Go syntax, e.g. 90s) falling back to
// env ("" for none).
func (f *Flags) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	f.fs.DurationVar(p, name, envValue(f, env, def, time.ParseDuration), withEnv(usage, env))
	f.add(name)
}

// Parse parses args. It returns the command line's error first (flag.ErrHelp
// for -h), then an error for positional arguments, then every environment
// variable that did not parse (errors.Join, each naming the variable and its
// value).
func (f *Flags) Parse(args []string) error {
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", f.fs.Args())
	}
	return errors.Join(f.errs...)
}

// Var defines a flag of a custom type (a repeatable flag, say); it reads
// no environment variable.
func (f *Flags) Var(v flag.Value, name, usage string) {
	f.fs.Var(v, name, usage)
	f.add(name)
}

// Usage returns a usage function for the flag set: "usage: " line, then
// each group's title and its flags as flag.PrintDefaults shows them. The
// heading says that flags fall back to an environment variable only when
// one of them does, and which: all ("each also read ..."), or those showing
// one.
func (f *Flags) Usage(line string) func() {
	return func() {
		w := f.fs.Output()
		fmt.Fprintf(w, "usage: %s\n\n%s\n", line, f.heading())
		for _, g := range f.groups {
			if len(g.names) == 0 {
				continue
			}
			if g.title != "" {
				fmt.Fprintf(w, "\n%s:\n", g.title)
			}
			printFlags(w, f.fs, g.names)
		}
	}
}

// heading is the line above the flags: it claims an environment variable
// fallback only as far as the flags have one.
func (f *Flags) heading() string {
	withEnv, all := 0, 0
	f.fs.VisitAll(func(fl *flag.Flag) {
		all++
		if strings.Contains(fl.Usage, "(env ") {
			withEnv++
		}
	})
	switch {
	case withEnv > 0 && withEnv == all:
		return "flags (each also read from the environment variable shown; the flag wins):"
	case withEnv > 0:
		return "flags (those showing an environment variable also read it; the flag wins):"
	}
	return "flags:"
}

// printFlags prints the named flags of fs as fs.PrintDefaults would.
func printFlags(w io.Writer, fs *flag.FlagSet, names []string) {
	sub := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	sub.SetOutput(w)
	for _, n := range names {
		fl := fs.Lookup(n)
		sub.Var(fl.Value, fl.Name, fl.Usage)
		sub.Lookup(n).DefValue = fl.DefValue
	}
	sub.PrintDefaults()
}

func (f *Flags) add(name string) {
	g := &f.groups[len(f.groups)-1]
	g.names = append(g.names, name)
}

// envValue returns env's value parsed, or def when env is "" or unset; a
// value that does not parse is recorded (KEY="value": reason) and def
// returned.
func envValue[T any](f *Flags, env string, def T, parse func(string) (T, error)) T {
	if env == "" {
		return def
	}
	s := os.Getenv(env)
	if s == "" {
		return def
	}
	v, err := parse(s)
	if err != nil {
		f.errs = append(f.errs, fmt.Errorf("%s=%q: %w", env, s, err))
		return def
	}
	return v
}

// withEnv appends " (env NAME)" to usage unless usage already names env.
func withEnv(usage, env string) string {
	if env == "" || strings.Contains(usage, "(env "+env) {
		return usage
	}
	return usage + " (env " + env + ")"
}

// LogOptions are the settings of a process's logger, the same for every
// command: --log-level and --log-format.
type LogOptions struct {
	// Level is debug, info, warn or error.
	Level string
	// Format is text or json.
	Format string
}

// Bind defines --log-level (env IRONLINK_LOG_LEVEL, default info) and
// --log-format (env IRONLINK_LOG_FORMAT, default text) on f, filling l.
func (l *LogOptions) Bind(f *Flags) {
	f.String(&l.Level, "log-level", "IRONLINK_LOG_LEVEL", "info", "debug, info, warn or error")
	f.String(&l.Format, "log-format", "IRONLINK_LOG_FORMAT", "text", "text or json")
}

// Logger returns the logger l describes (NewLogger); its error names a bad
// level or format.
func (l LogOptions) Logger() (*slog.Logger, error) { return NewLogger(l.Level, l.Format) }

// Package cli holds the small helpers both binaries use for flags that fall
// back to environment variables, and for slog set-up.
package cli

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
)

// Env returns the value of environment variable key, or def when unset or empty.
func Env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// EnvDuration returns the duration in environment variable key (Go syntax,
// e.g. "60s"), or def when unset. A malformed value is returned as an error
// naming the variable.
func EnvDuration(key string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(key)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", key, v, err)
	}
	return d, nil
}

// NewLogger returns a JSON or text slog logger on stderr at level
// ("debug", "info", "warn", "error").
func NewLogger(level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch strings.ToLower(format) {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	case "text", "":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}

// Usage prints a usage line and the flag defaults of fs to stderr.
func Usage(fs *flag.FlagSet, line string) func() {
	return func() {
		fmt.Fprintf(os.Stderr, "usage: %s\n\nflags (those showing an environment variable also read it; the flag wins):\n", line)
		fs.PrintDefaults()
	}
}

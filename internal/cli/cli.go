// Package cli holds the small helpers both binaries use for flags that fall
// back to environment variables, and for slog set-up.
package cli

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
)

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

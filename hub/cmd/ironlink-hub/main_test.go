package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

// Each subcommand's -h lists its own flags and claims an environment
// variable fallback only when its flags have one.
func TestSubcommandHelpIsTrue(t *testing.T) {
	help := func(t *testing.T, f func(stderr io.Writer) error) string {
		t.Helper()
		var stderr bytes.Buffer
		if err := f(&stderr); !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("-h: %v, want flag.ErrHelp", err)
		}
		return stderr.String()
	}
	cases := []struct {
		name      string
		run       func(stderr io.Writer) error
		want, not []string
	}{
		{"keygen", func(w io.Writer) error { return keygenTo([]string{"-h"}, io.Discard, w) },
			[]string{"-client-id", "-out", "-force", "\nflags:\n"}, []string{"environment", "(env "}},
		{"dev-pki", func(w io.Writer) error { return devPKITo([]string{"-h"}, io.Discard, w) },
			[]string{"-dir", "-client", "\nflags:\n"}, []string{"environment", "(env "}},
		{"token", func(w io.Writer) error { return tokenTo([]string{"-h"}, io.Discard, w) },
			[]string{"-key", "env IRONLINK_CLIENT_KEY", "-lifetime", "those showing an environment variable"}, []string{"each also read"}},
		{"migrate", func(w io.Writer) error { return run([]string{"migrate", "-h"}, w) },
			[]string{"ironlink-hub migrate", "-database-url", "env DATABASE_URL", "-log-level", "each also read from the environment variable"},
			[]string{"-listen", "-roster", "-stale-after", "-tls-cert", "-plaintext"}},
		{"serve", func(w io.Writer) error { return run([]string{"serve", "-h"}, w) },
			[]string{"-database-url", "-listen", "-roster", "-no-auth", "those showing an environment variable"}, []string{"each also read"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := help(t, tc.run)
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("help lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("help has %q:\n%s", n, out)
				}
			}
		})
	}
}

func TestMigrateRefusesServeFlags(t *testing.T) {
	if err := run([]string{"migrate", "--listen", ":1"}, io.Discard); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("migrate --listen: %v, want an unknown-flag error", err)
	}
}

package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/ironlink/ironlink/internal/cli"
)

// -h lists every flag once (with its default: internal/cli's test), and
// every flag but the switches with the environment variable it reads
// (docs' flag reference is checked against this output).
func TestHelpListsEveryFlagWithItsVariable(t *testing.T) {
	var out bytes.Buffer
	f := cli.NewCommand("ironlink-satellite", runUsage, &out)
	if _, _, err := parseFlags(f, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	help := out.String()
	n := 0
	f.FlagSet().VisitAll(func(f *flag.Flag) {
		n++
		if strings.Count(help, "\n  -"+f.Name+" ")+strings.Count(help, "\n  -"+f.Name+"\n") != 1 {
			t.Errorf("-%s is not listed exactly once:\n%s", f.Name, help)
		}
		// The flags that lower security are flags only: an environment
		// variable left set would turn them on unseen.
		flagOnly := f.Name == "no-auth" || f.Name == "hub-plaintext" || f.Name == "openstack-insecure-skip-verify"
		if !flagOnly && !strings.Contains(f.Usage, "(env ") {
			t.Errorf("-%s names no environment variable: %q", f.Name, f.Usage)
		}
	})
	if n < 10 {
		t.Fatalf("only %d flags defined", n)
	}
}

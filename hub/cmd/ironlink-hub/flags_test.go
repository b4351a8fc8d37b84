package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/ironlink/ironlink/internal/cli"
)

// serve -h lists every flag once (with its default: internal/cli's test),
// and every flag but the switches with the environment variable it reads (docs' flag reference
// is checked against this output).
func TestServeHelpListsEveryFlagWithItsVariable(t *testing.T) {
	var out bytes.Buffer
	f := cli.NewCommand("ironlink-hub serve", serveUsage, &out)
	if _, _, err := parseServeFlags(f, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	checkHelp(t, f.FlagSet(), out.String(), "no-auth", "plaintext", "migrate", "admin-pprof", "policy-poll-only")
}

// checkHelp checks that help lists each flag of fs exactly once, each with
// an environment variable but the switches named.
func checkHelp(t *testing.T, fs *flag.FlagSet, help string, switches ...string) {
	t.Helper()
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		entry := "\n  -" + f.Name + " "
		if strings.Count(help, entry)+strings.Count(help, "\n  -"+f.Name+"\n") != 1 {
			t.Errorf("-%s is not listed exactly once:\n%s", f.Name, help)
		}
		isSwitch := false
		for _, s := range switches {
			isSwitch = isSwitch || s == f.Name
		}
		if !isSwitch && !strings.Contains(f.Usage, "(env ") {
			t.Errorf("-%s names no environment variable: %q", f.Name, f.Usage)
		}
	})
	if n < 10 {
		t.Fatalf("only %d flags defined", n)
	}
}

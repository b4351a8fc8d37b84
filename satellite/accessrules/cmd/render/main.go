// Command render prints deploy/openstack/access-rules.yaml from the
// satellite's call tables; with -operations it prints
// deploy/openstack/operations-access-rules.yaml instead.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/ironlink/ironlink/satellite/accessrules"
)

func main() {
	ops := flag.Bool("operations", false, "render the operations credential's rules")
	flag.Parse()
	rules := accessrules.Rules()
	if *ops {
		rules = accessrules.OperationsRules()
	}
	b, err := accessrules.Render(rules)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Stdout.Write(b)
}

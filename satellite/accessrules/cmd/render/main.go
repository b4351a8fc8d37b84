// Command render prints deploy/openstack/access-rules.yaml from the
// satellite's call tables.
package main

import (
	"fmt"
	"os"

	"github.com/ironlink/ironlink/satellite/accessrules"
)

func main() {
	b, err := accessrules.Render(accessrules.Rules())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Stdout.Write(b)
}

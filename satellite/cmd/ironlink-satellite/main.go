// Command ironlink-satellite runs one site's satellite: it polls that site's
// OpenStack Ironic (and Placement), streams device conditions to the hub and
// applies the hub's quarantine/release commands.
//
//	ironlink-satellite [flags]           run (flags in flags.go, each filling app.Options)
//	ironlink-satellite validate [flags]  check the configuration and exit
//	ironlink-satellite version
package main

import (
	"fmt"
	"os"

	"github.com/ironlink/ironlink/internal/cli"
	"github.com/ironlink/ironlink/internal/version"
)

func main() {
	cli.Exit("ironlink-satellite", run(os.Args[1:]))
}

// run runs the subcommand args names, or the satellite with args as its
// flags.
func run(args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "version":
			fmt.Println(version.String())
			return nil
		case "validate":
			return runValidate(args[1:], os.Stdout, os.Stderr)
		}
	}
	return runSatellite(args, os.Stderr)
}

// Command ironlink-hub serves the ironlink hub: the satellite link and the
// operator API, over one PostgreSQL database.
//
//	ironlink-hub [serve] [flags]   run the hub (migrates first)
//	ironlink-hub validate [flags]  check serve's configuration (roster, TLS files) and exit
//	ironlink-hub migrate [flags]   apply database migrations and exit
//	ironlink-hub keygen ...        create a client key pair, print its roster entry
//	ironlink-hub token ...         mint a short-lived client assertion (for grpcurl)
//	ironlink-hub dev-pki ...       create a throwaway CA and certificates (development)
//	ironlink-hub web-proxy ...     the demo's token proxy in front of the fleet view
//	ironlink-hub web-cert ...      a client certificate over an operator key (fleet view, mtls)
//	ironlink-hub version
//
// Serve's flags are defined in flags.go, each filling app.Options.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/ironlink/ironlink/internal/cli"
	"github.com/ironlink/ironlink/internal/version"
)

func main() {
	cli.Exit("ironlink-hub", run(os.Args[1:], os.Stderr))
}

// subcommands runs each subcommand on the arguments after its name, usage
// to stderr.
var subcommands = map[string]func(args []string, stderr io.Writer) error{
	"serve":     runServe,
	"validate":  func(args []string, stderr io.Writer) error { return runValidate(args, os.Stdout, stderr) },
	"migrate":   runMigrate,
	"keygen":    func(args []string, _ io.Writer) error { return runKeygen(args) },
	"token":     func(args []string, _ io.Writer) error { return runToken(args) },
	"dev-pki":   func(args []string, _ io.Writer) error { return runDevPKI(args) },
	"web-proxy": runWebProxy,
	"web-cert":  runWebCert,
	"version":   func([]string, io.Writer) error { fmt.Println(version.String()); return nil },
}

// run runs the subcommand args names, or serve with args as its flags.
func run(args []string, stderr io.Writer) error {
	if len(args) > 0 && subcommands[args[0]] != nil {
		return subcommands[args[0]](args[1:], stderr)
	}
	return runServe(args, stderr)
}

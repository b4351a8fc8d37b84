// Command ironlink-openstacksim serves a simulated OpenStack site (Keystone,
// Ironic, Placement and Nova on one loopback listener) seeded like the test
// bed, for `make demo` and manual poking.
//
// Usage:
//
//	ironlink-openstacksim [--listen 127.0.0.1:0] [--nodes 50] [--churn 10s]
//	    [--clouds-yaml PATH] [--cloud sim] [--token-ttl 1h] [--no-placement]
//	    [--no-nova] [--nova-non-admin] [--orphans-ironic N] [--orphans-nova N]
//
// Once listening it prints exactly one line on stdout,
// OPENSTACK_SIM_URL=http://127.0.0.1:PORT, and logs everything else (slog,
// text) on stderr. It stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ironlink-openstacksim:", err)
		os.Exit(1)
	}
}

// run serves the simulated site until SIGINT or SIGTERM.
func run() error {
	o := parseOptions()
	log := o.logger()
	c, err := o.newCloud(log)
	if err != nil {
		return err
	}
	if err := c.Start(o.listen); err != nil {
		return err
	}
	defer c.Close()
	if o.cloudsYAML != "" {
		if err := c.WriteCloudsYAML(o.cloudsYAML, o.cloud); err != nil {
			return err
		}
		log.Info("wrote clouds.yaml", "path", o.cloudsYAML, "cloud", o.cloud)
	}
	fmt.Printf("OPENSTACK_SIM_URL=%s\n", c.URL())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.churn > 0 {
		go c.Churn(ctx, o.churn, nil)
	}
	<-ctx.Done()
	log.Info("stopping")
	return nil
}

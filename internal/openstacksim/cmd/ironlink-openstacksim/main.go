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
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/ironlink/ironlink/internal/openstacksim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ironlink-openstacksim:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:0", "loopback address to listen on (port 0 picks a free port)")
	nodes := flag.Int("nodes", 50, "number of nodes to seed like the test bed's seed-nodes (0: none)")
	churn := flag.Duration("churn", 10*time.Second, "interval of simulated fleet changes (0: off)")
	cloudsYAML := flag.String("clouds-yaml", "", "write a clouds.yaml for the simulated site to this path")
	cloud := flag.String("cloud", "sim", "cloud name in the clouds.yaml")
	tokenTTL := flag.Duration("token-ttl", time.Hour, "lifetime of issued Keystone tokens")
	noPlacement := flag.Bool("no-placement", false, "simulate a standalone-Ironic site (no Placement and no Nova in the catalog)")
	noNova := flag.Bool("no-nova", false, "leave Nova (compute) out of the catalog; /compute answers 404")
	novaNonAdmin := flag.Bool("nova-non-admin", false, "answer Nova requests as for a credential without the admin policy (no OS-EXT-SRV-ATTR fields, all_tenants 403)")
	orphansIronic := flag.Int("orphans-ironic", 0, "after seeding, delete the Nova server of this many active nodes (Ironic points at an instance Nova does not know)")
	orphansNova := flag.Int("orphans-nova", 0, "after seeding, boot this many Nova servers on available nodes that do not point back")
	debug := flag.Bool("debug", false, "log every request")
	provisionStep := flag.Duration("provision-step", 500*time.Millisecond, "time between two provision states of a transition asked for through the API (enrol, inspect, clean, provide, deploy, undeploy, Nova boot and delete)")
	nodeTraits := flag.Bool("node-traits", true, "also put CUSTOM_CUSTOMER_READY on the Ironic node of every provider that has it, as a Nova-managed site converges to (false: provider only, like the test bed's default seed)")
	flag.Parse()

	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	c := openstacksim.New(openstacksim.Options{TokenTTL: *tokenTTL, NoPlacement: *noPlacement, NoNova: *noNova,
		NovaNonAdmin: *novaNonAdmin, ProvisionStep: *provisionStep, Logger: log})
	if *nodes > 0 {
		c.SeedLikeTestbed(*nodes)
		log.Info("seeded nodes like the test bed", "nodes", *nodes)
		if *nodeTraits {
			for _, n := range c.Nodes() {
				if traits, _, ok := c.ProviderTraits(n.UUID); ok && slices.Contains(traits, openstacksim.ReadyTrait) && !slices.Contains(n.Traits, openstacksim.ReadyTrait) {
					_ = c.UpdateNode(n.UUID, func(n *openstacksim.Node) { n.Traits = append(n.Traits, openstacksim.ReadyTrait) })
				}
			}
		}
		if *orphansIronic > 0 || *orphansNova > 0 {
			ironic, nova, err := c.SeedOrphans(*orphansIronic, *orphansNova)
			if err != nil {
				return err
			}
			log.Info("seeded deliberate orphans", "ironic_side", ironic, "nova_side", nova)
		}
	}
	if err := c.Start(*listen); err != nil {
		return err
	}
	defer c.Close()
	if *cloudsYAML != "" {
		if err := c.WriteCloudsYAML(*cloudsYAML, *cloud); err != nil {
			return err
		}
		log.Info("wrote clouds.yaml", "path", *cloudsYAML, "cloud", *cloud)
	}
	fmt.Printf("OPENSTACK_SIM_URL=%s\n", c.URL())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *churn > 0 {
		go c.Churn(ctx, *churn, nil)
	}
	<-ctx.Done()
	log.Info("stopping")
	return nil
}

package main

import (
	"flag"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/ironlink/ironlink/internal/openstacksim"
)

// options are the simulator's flags.
type options struct {
	listen, cloudsYAML, cloud      string
	nodes                          int
	churn, tokenTTL, provisionStep time.Duration
	noPlacement, noNova            bool
	novaNonAdmin, debug            bool
	nodeTraits                     bool
	orphansIronic, orphansNova     int
	controlSocket                  string
	hardware                       bool
}

// parseOptions defines the simulator's flags on the command line's flag
// set and parses the process's arguments (-h prints them and exits).
func parseOptions() options {
	var o options
	flag.StringVar(&o.listen, "listen", "127.0.0.1:0", "loopback address to listen on (port 0 picks a free port)")
	flag.IntVar(&o.nodes, "nodes", 50, "number of nodes to seed like the test bed's seed-nodes (0: none)")
	flag.DurationVar(&o.churn, "churn", 10*time.Second, "interval of simulated fleet changes (0: off)")
	flag.StringVar(&o.cloudsYAML, "clouds-yaml", "", "write a clouds.yaml for the simulated site to this path")
	flag.StringVar(&o.cloud, "cloud", "sim", "cloud name in the clouds.yaml")
	flag.DurationVar(&o.tokenTTL, "token-ttl", time.Hour, "lifetime of issued Keystone tokens")
	flag.BoolVar(&o.noPlacement, "no-placement", false, "simulate a standalone-Ironic site (no Placement and no Nova in the catalog)")
	flag.BoolVar(&o.noNova, "no-nova", false, "leave Nova (compute) out of the catalog; /compute answers 404")
	flag.BoolVar(&o.novaNonAdmin, "nova-non-admin", false, "answer Nova requests as for a credential without the admin policy (no OS-EXT-SRV-ATTR fields, all_tenants 403)")
	flag.IntVar(&o.orphansIronic, "orphans-ironic", 0, "after seeding, delete the Nova server of this many active nodes (Ironic points at an instance Nova does not know)")
	flag.IntVar(&o.orphansNova, "orphans-nova", 0, "after seeding, boot this many Nova servers on available nodes that do not point back")
	flag.BoolVar(&o.debug, "debug", false, "log every request")
	flag.DurationVar(&o.provisionStep, "provision-step", 500*time.Millisecond, "time between two provision states of a transition asked for through the API (enrol, inspect, clean, provide, deploy, undeploy, Nova boot and delete)")
	flag.BoolVar(&o.nodeTraits, "node-traits", true, "also put CUSTOM_CUSTOMER_READY on the Ironic node of every provider that has it, as a Nova-managed site converges to (false: provider only, like the test bed's default seed)")
	flag.StringVar(&o.controlSocket, "control-socket", "", "serve POST/DELETE /faults on this Unix socket (mode 0600) to inject faults into the running simulator")
	flag.BoolVar(&o.hardware, "hardware", false, "give every seeded node but those in enroll an inspection inventory and BIOS settings (GET /v1/nodes/{node}/inventory and /bios), the test bed's seed-inventory machine, with the demo's outliers: node-006 with 7 GPUs, node-009 on BIOS 1.4.2 with Hyper-Threading on")
	flag.Parse()
	return o
}

// logger logs text on stderr, every request with -debug.
func (o options) logger() *slog.Logger {
	level := slog.LevelInfo
	if o.debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// newCloud builds the simulated site and seeds it: nodes like the test
// bed, the ready trait on nodes (-node-traits) and deliberate orphans.
func (o options) newCloud(log *slog.Logger) (*openstacksim.Cloud, error) {
	c := openstacksim.New(openstacksim.Options{TokenTTL: o.tokenTTL, NoPlacement: o.noPlacement, NoNova: o.noNova,
		NovaNonAdmin: o.novaNonAdmin, ProvisionStep: o.provisionStep, Logger: log})
	if o.nodes <= 0 {
		return c, nil
	}
	c.SeedLikeTestbed(o.nodes)
	log.Info("seeded nodes like the test bed", "nodes", o.nodes)
	if o.nodeTraits {
		for _, n := range c.Nodes() {
			if traits, _, ok := c.ProviderTraits(n.UUID); ok && slices.Contains(traits, openstacksim.ReadyTrait) && !slices.Contains(n.Traits, openstacksim.ReadyTrait) {
				_ = c.UpdateNode(n.UUID, func(n *openstacksim.Node) { n.Traits = append(n.Traits, openstacksim.ReadyTrait) })
			}
		}
	}
	if o.hardware {
		names := c.SeedHardware(openstacksim.DemoOutliers)
		log.Info("seeded inventories and BIOS settings", "nodes", len(names), "outliers", "node-006: 7 GPUs; node-009: BIOS 1.4.2, HyperThreading Enabled")
	}
	if o.orphansIronic > 0 || o.orphansNova > 0 {
		ironic, nova, err := c.SeedOrphans(o.orphansIronic, o.orphansNova)
		if err != nil {
			return nil, err
		}
		log.Info("seeded deliberate orphans", "ironic_side", ironic, "nova_side", nova)
	}
	return c, nil
}

package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "health" {
		healthMain(os.Args[2:])
		return
	}
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
	if o.controlSocket != "" {
		stopControl, err := serveControl(o.controlSocket, c, log)
		if err != nil {
			return err
		}
		defer stopControl()
	}
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

package main

import (
	"flag"

	"github.com/ironlink/ironlink/hub/app"
	"github.com/ironlink/ironlink/internal/cli"
)

// addPolicyFlags defines --policy-file and --policy-interval (each also
// read from its environment variable).
func addPolicyFlags(fs *flag.FlagSet, cfg *app.Config, def app.Config) error {
	fs.StringVar(&cfg.PolicyFile, "policy-file", cli.Env("IRONLINK_HUB_POLICY_FILE", ""),
		"YAML quarantine policy (the chart values' `policy` key); reloaded on SIGHUP and on change; empty: automatic quarantine off (env IRONLINK_HUB_POLICY_FILE)")
	v, err := cli.EnvDuration("IRONLINK_HUB_POLICY_INTERVAL", def.PolicyInterval)
	fs.DurationVar(&cfg.PolicyInterval, "policy-interval", v, "how often the policy evaluator runs (on one replica at a time) (env IRONLINK_HUB_POLICY_INTERVAL)")
	return err
}

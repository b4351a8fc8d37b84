package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"

	"github.com/ironlink/ironlink/hub/throttle"
	"github.com/ironlink/ironlink/internal/cli"
)

// addThrottleFlags defines --operator-rate, --operator-burst and
// --operator-max-streams (defaults d, app.Defaults' Throttle; each also read
// from its environment variable). It returns an error for an environment
// value that does not parse.
func addThrottleFlags(fs *flag.FlagSet, c *throttle.Config, d throttle.Config) error {
	var errs []error
	rate, err := strconv.ParseFloat(cli.Env("IRONLINK_HUB_OPERATOR_RATE", fmt.Sprint(d.Rate)), 64)
	if err != nil {
		errs = append(errs, fmt.Errorf("IRONLINK_HUB_OPERATOR_RATE: %w", err))
	}
	burst, err := strconv.Atoi(cli.Env("IRONLINK_HUB_OPERATOR_BURST", strconv.Itoa(d.Burst)))
	if err != nil {
		errs = append(errs, fmt.Errorf("IRONLINK_HUB_OPERATOR_BURST: %w", err))
	}
	streams, err := strconv.Atoi(cli.Env("IRONLINK_HUB_OPERATOR_MAX_STREAMS", strconv.Itoa(d.MaxStreams)))
	if err != nil {
		errs = append(errs, fmt.Errorf("IRONLINK_HUB_OPERATOR_MAX_STREAMS: %w", err))
	}
	fs.Float64Var(&c.Rate, "operator-rate", rate, "operator API calls per second each client may make; 0: no limit (env IRONLINK_HUB_OPERATOR_RATE)")
	fs.IntVar(&c.Burst, "operator-burst", burst, "operator API calls a client may make at once above --operator-rate (env IRONLINK_HUB_OPERATOR_BURST)")
	fs.IntVar(&c.MaxStreams, "operator-max-streams", streams, "streams one operator client may hold open at once; 0: no cap (env IRONLINK_HUB_OPERATOR_MAX_STREAMS)")
	return errors.Join(errs...)
}

package main

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/cli"
)

// addOperationFlags defines --operations-per-site, --operation-resend-after
// and --operation-max-resend-after (defaults d, app.Defaults'
// Link.Operations; each also read from its environment variable). It
// returns an error for an environment value that does not parse.
func addOperationFlags(fs *flag.FlagSet, c *store.OperationDelivery, d store.OperationDelivery) error {
	limit, err := strconv.Atoi(cli.Env("IRONLINK_HUB_OPERATIONS_PER_SITE", strconv.Itoa(d.PerSiteLimit)))
	if err != nil {
		return fmt.Errorf("IRONLINK_HUB_OPERATIONS_PER_SITE: %w", err)
	}
	fs.IntVar(&c.PerSiteLimit, "operations-per-site", limit, "operations RUNNING at once per site; more wait PENDING, visibly queued (env IRONLINK_HUB_OPERATIONS_PER_SITE)")
	resend, err := cli.EnvDuration("IRONLINK_HUB_OPERATION_RESEND_AFTER", d.ResendAfter)
	if err != nil {
		return err
	}
	fs.DurationVar(&c.ResendAfter, "operation-resend-after", resend, "resend a RUNNING operation without progress for this long, as a new attempt (doubles while none comes) (env IRONLINK_HUB_OPERATION_RESEND_AFTER)")
	maxResend, err := cli.EnvDuration("IRONLINK_HUB_OPERATION_MAX_RESEND_AFTER", d.MaxResendAfter)
	if err != nil {
		return err
	}
	fs.DurationVar(&c.MaxResendAfter, "operation-max-resend-after", maxResend, "cap of the doubling wait between operation resends (env IRONLINK_HUB_OPERATION_MAX_RESEND_AFTER)")
	return nil
}

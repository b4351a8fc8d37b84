package ctl

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// opListFlags are the flags of `op list` and `get operations`.
type opListFlags struct {
	output, site, device, group string
	kinds, states               []string
	limit                       int
}

// request builds the ListOperationsRequest of the flags (without paging).
// Errors (usage): a malformed device, an unknown kind or state.
func (o *opListFlags) request() (*ironlinkv1.ListOperationsRequest, error) {
	if err := checkOutput(o.output, outTable, outWide, outJSON, outYAML, outName); err != nil {
		return nil, err
	}
	if o.limit < 0 {
		return nil, usageErrf("--limit %d: want 0 (all) or more", o.limit)
	}
	req := &ironlinkv1.ListOperationsRequest{Site: o.site, GroupId: o.group}
	if o.device != "" {
		d, err := parseDeviceArg(o.device, o.site)
		if err != nil {
			return nil, err
		}
		req.Device = d.ref()
	}
	for _, k := range o.kinds {
		v, ok := opKinds[strings.ToLower(k)]
		if !ok {
			return nil, usageErrf("--kind %q: want one of %s", k, kindNames())
		}
		req.Kinds = append(req.Kinds, v)
	}
	for _, s := range o.states {
		v, ok := ironlinkv1.OperationState_value["OPERATION_STATE_"+strings.ToUpper(s)]
		if !ok || v == 0 {
			return nil, usageErrf("--state %q: want pending, running, succeeded, failed or cancelled", s)
		}
		req.States = append(req.States, ironlinkv1.OperationState(v))
	}
	return req, nil
}

// newOpListCommand builds `op list` and, with use "operations", `get
// operations`: OperationService.ListOperations, every page up to --limit.
func (a *app) newOpListCommand(use string, aliases ...string) *cobra.Command {
	var o opListFlags
	cmd := &cobra.Command{
		Use:     use,
		Aliases: aliases,
		Short:   "List operations, newest first",
		Long: `List operations (OperationService.ListOperations), newest first.
STATE is PENDING, RUNNING, SUCCEEDED, FAILED or CANCELLED; -o wide adds who
asked, why and the last error in full. Operation ids can be given to the other op
commands by a unique prefix (at least 4 characters).`,
		Example: `  ironlink get operations --site site-b --state pending,running
  ironlink get operations --device node-007 -o wide
  ironlink op list --group 5d0c1f3e-7a2b-4c8d-9e6f-0a1b2c3d4e5f`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := o.request() // usage errors before any call
			if err != nil {
				return err
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			if o.device != "" {
				d, err := c.expandDevicePrefixes(cmd.Context(), []string{o.device}, o.site)
				if err != nil {
					return err
				}
				o.device = d[0]
				if req, err = o.request(); err != nil {
					return err
				}
			}
			resp := &ironlinkv1.ListOperationsResponse{}
			for {
				req.PageSize = 1000
				if o.limit > 0 {
					req.PageSize = int32(min(1000, o.limit-len(resp.Operations)))
				}
				cctx, cancel := c.call(cmd.Context())
				r, err := c.ops.ListOperations(cctx, req)
				cancel()
				if err != nil {
					return c.explain(err)
				}
				resp.Operations = append(resp.Operations, r.GetOperations()...)
				resp.NextPageToken = r.GetNextPageToken()
				if req.PageToken = r.GetNextPageToken(); req.PageToken == "" || o.limit > 0 && len(resp.Operations) >= o.limit {
					break
				}
			}
			return a.printOperationList(resp, o.output)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "", "output: wide (who, why and the last error in full), json, yaml or name")
	f.StringVar(&o.site, "site", "", "only this site")
	f.StringVar(&o.device, "device", "", "only this device (name, SITE/NAME or UUID)")
	f.StringVar(&o.group, "group", "", "only this group id")
	f.StringSliceVar(&o.kinds, "kind", nil, "only these kinds ("+kindNames()+")")
	f.StringSliceVar(&o.states, "state", nil, "only these states (pending, running, succeeded, failed, cancelled)")
	f.IntVar(&o.limit, "limit", 100, "at most this many (newest first); 0 for all")
	_ = cmd.RegisterFlagCompletionFunc("site", a.completeSites)
	_ = cmd.RegisterFlagCompletionFunc("device", a.completeDevices)
	_ = cmd.RegisterFlagCompletionFunc("kind", cobra.FixedCompletions(strings.Split(kindNames(), ", "), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions([]string{"pending", "running", "succeeded", "failed", "cancelled"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// printOperationList prints a listing of operations in format output.
func (a *app) printOperationList(r *ironlinkv1.ListOperationsResponse, output string) error {
	switch output {
	case outJSON, outYAML:
		return writeProto(a.opts.Stdout, output, r)
	case outName:
		for _, o := range r.GetOperations() {
			fmt.Fprintln(a.opts.Stdout, o.GetOperationId())
		}
		return nil
	}
	if len(r.GetOperations()) == 0 {
		fmt.Fprintln(a.opts.Stderr, "No operations found.")
		return nil
	}
	a.printOperations(r.GetOperations(), output == outWide)
	if r.GetNextPageToken() != "" {
		fmt.Fprintf(a.opts.Stderr, "more operations: raise --limit (0 for all) or filter\n")
	}
	return nil
}

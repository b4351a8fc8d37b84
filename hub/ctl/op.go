package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/boundedread"
	"github.com/ironlink/ironlink/internal/wire"
)

// opKinds maps the CLI's kind names to the proto values.
var opKinds = map[string]ironlinkv1.OperationKind{
	"enrol": ironlinkv1.OperationKind_OPERATION_KIND_ENROL, "inspect": ironlinkv1.OperationKind_OPERATION_KIND_INSPECT,
	"clean": ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, "provide": ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE,
	"deploy": ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY, "undeploy": ironlinkv1.OperationKind_OPERATION_KIND_UNDEPLOY,
	"nova-create": ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, "nova-delete": ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE,
	"adopt": ironlinkv1.OperationKind_OPERATION_KIND_ADOPT, "hardware-reread": ironlinkv1.OperationKind_OPERATION_KIND_HARDWARE_REREAD,
	"validate": ironlinkv1.OperationKind_OPERATION_KIND_VALIDATE,
}

func kindNames() string {
	var n []string
	for k := range opKinds {
		n = append(n, k)
	}
	slices.Sort(n)
	return strings.Join(n, ", ")
}

func opKindName(k ironlinkv1.OperationKind) string {
	if n, ok := nodeActionName(k); ok {
		return n
	}
	return strings.ReplaceAll(strings.ToLower(wire.EnumName(k, "OPERATION_KIND_")), "_", "-")
}

func opStateName(s ironlinkv1.OperationState) string { return wire.EnumName(s, "OPERATION_STATE_") }

func opFinal(s ironlinkv1.OperationState) bool {
	return s == ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED || s == ironlinkv1.OperationState_OPERATION_STATE_FAILED ||
		s == ironlinkv1.OperationState_OPERATION_STATE_CANCELLED
}

// newOpCommand builds `ironlink op` (OperationService).
func (a *app) newOpCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "op",
		Short: "Run node lifecycle operations and node actions at a site: enrol, inspect, clean, provide, deploy, Nova create, power, reboot, maintenance, reprovision",
		Long: `Operations are durable work the hub stores and the site's satellite carries
out against Ironic (and Nova): PENDING (queued), RUNNING, then SUCCEEDED,
FAILED (with Ironic's last_error) or CANCELLED. They need scope
operations:write to start or cancel, operations:read to look.`,
	}
	cmd.AddCommand(a.newOpStartCommand(), a.newOpGetCommand(), a.newOpListCommand("list"), a.newOpCancelCommand(), a.newOpWatchCommand(), a.newOpRetryCommand())
	return cmd
}

// opStartFlags are the flags of `ironlink op start`.
type opStartFlags struct {
	reason, site, nodesFile, selector                                              string
	imageSource, imageChecksum, novaImage, novaFlavor, novaName, keyName, serverID string
	userData, template                                                             string
	cleanSteps, networks, sshKeys, checks                                          []string
	force, forceClear, wait                                                        bool
	rootGB                                                                         int32
	timeout                                                                        time.Duration
	node                                                                           opNodeFlags
	metadata                                                                       map[string]string
}

func (a *app) newOpStartCommand() *cobra.Command {
	var o opStartFlags
	cmd := &cobra.Command{
		Use:   "start KIND [DEVICE... | -l SELECTOR] --reason TEXT",
		Short: "Start an operation on devices (or, for enrol, on node specs from --nodes)",
		Long: `Start one operation per target, grouped. KIND is one of ` + kindNames() + `.
Devices are named by Ironic node name, SITE/NAME or UUID (--site narrows names). enrol
takes --site and --nodes FILE: a JSON array of NodeSpec objects as in the API
(name, driver, driverInfo, resourceClass, properties, owner, lessee, traits,
ports [{address, pxeEnabled}]); "-" reads stdin. BMC credentials in
driverInfo go to the site's Ironic only, never into the hub's database.
-l takes the --selector syntax of quarantine (site=, class=, status=, reason=,
name=, hw.FACT=) instead of named devices, e.g. an outlier group's selector
from ` + "`ironlink drift`" + ` (at most 1000 devices).

With --wait the command follows every operation to its end and fails (exit 6)
when one ends FAILED or CANCELLED, or (exit 7) when --timeout passes first.`,
		Example: `  ironlink op start enrol --site site-b --nodes rack1.json --reason "rack 1" --wait
  ironlink op start provide node-001 node-002 --reason "make available" --wait
  ironlink op start clean node-007 --clean-step deploy.erase_devices_metadata --reason "wipe"
  ironlink op start deploy node-007 --image-source http://img/ubuntu.qcow2 --image-checksum sha256:ab12... --reason "image node"
  ironlink op start nova-create node-009 --nova-image ubuntu-22.04 --nova-name slurm-w9 --reason "SLURM worker"
  ironlink op start nova-create node-009 --template slurm-worker --nova-name slurm-w9 --reason "SLURM worker"
  ironlink op start adopt slurm-w3 --image-source http://img/slurm-worker.qcow2 --reason "take over SLURM worker"
  ironlink op start validate node-007 --check gpu-burn --reason "back from RMA"
  ironlink op start hardware-reread node-007 --reason "DIMM swapped"
  ironlink op start inspect -l 'site=site-a,class=gpu-h100,hw.gpu_count=7' --reason "7 GPUs: inspect again"
  ironlink op start reboot node-007 --soft --reason "hung GPU" --wait
  ironlink op start maintenance-set node-007 --reason "DIMM swap, ticket 4711"`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.selector != "" {
				if _, ok := opKinds[args[0]]; !ok || args[0] == "enrol" {
					return usageErrf("-l selects devices of an operation on devices, not %q", args[0])
				}
				devs, err := a.targets(cmd.Context(), args[1:], o.selector, o.site)
				if err != nil {
					return err
				}
				args = append(args[:1:1], devs...)
			}
			req, err := o.request(args) // usage errors before any call
			if err != nil {
				return err
			}
			if o.selector == "" && len(args) > 1 {
				c, err := a.connect()
				if err != nil {
					return err
				}
				devs, err := c.expandDevicePrefixes(cmd.Context(), args[1:], o.site)
				if err != nil {
					return err
				}
				if req, err = o.request(append(args[:1:1], devs...)); err != nil {
					return err
				}
			}
			return a.startOperations(cmd.Context(), req, o.wait, o.timeout)
		},
	}
	o.bind(cmd)
	return cmd
}

// bind defines the flags of `op start` on cmd.
func (o *opStartFlags) bind(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.reason, "reason", "", "why (required; kept with the operation)")
	f.StringVar(&o.site, "site", "", "the site (required for enrol; narrows device names otherwise)")
	f.StringVar(&o.nodesFile, "nodes", "", "enrol: JSON array of node specs (\"-\": stdin)")
	f.StringVarP(&o.selector, "selector", "l", "", "every device this selector matches instead of named devices (not enrol)")
	f.BoolVar(&o.force, "force", false, "override the quarantine guard of provide, deploy, nova-create, the customer-instance guard of power-off, reboot, reprovision, and enrol's refusal of a name a node past manageable already has (recorded)")
	f.StringSliceVar(&o.cleanSteps, "clean-step", nil, "clean, reprovision, validate: INTERFACE.STEP, repeatable, in order (reprovision: a manual clean before the provide)")
	f.StringSliceVar(&o.checks, "check", nil, "validate: an external check whose passing result the run waits for, repeatable")
	f.StringVar(&o.imageSource, "image-source", "", "deploy, adopt: instance_info.image_source (URL or Glance image id; for adopt the image the machine runs)")
	f.StringVar(&o.imageChecksum, "image-checksum", "", "deploy: image checksum (required for an http(s) image); adopt: optional")
	f.Int32Var(&o.rootGB, "root-gb", 0, "deploy, adopt: root partition size in GiB (deploy: 0 is the node's local_gb; adopt: 0 leaves it unset)")
	f.StringSliceVar(&o.sshKeys, "ssh-key", nil, "deploy: SSH public key for the config drive, repeatable")
	f.StringVar(&o.userData, "user-data", "", "deploy, nova-create: cloud-init user data")
	f.StringVar(&o.novaImage, "nova-image", "", "nova-create: image name or id")
	f.StringVar(&o.novaFlavor, "nova-flavor", "", "nova-create: flavor (default: the site's flavor of the node's resource class)")
	f.StringVar(&o.novaName, "nova-name", "", "nova-create: server name")
	f.StringVar(&o.keyName, "key-name", "", "nova-create: key pair name")
	f.StringSliceVar(&o.networks, "network", nil, "nova-create: network id, repeatable (default: the site's networks)")
	f.StringVar(&o.template, "template", "", "nova-create: a named template of the hub's --nova-templates-file (image, flavor, key pair, user data, metadata); flags given override it")
	f.StringToStringVar(&o.metadata, "metadata", nil, "nova-create: server metadata KEY=VALUE, repeatable (merged over the template's)")
	f.BoolVar(&o.forceClear, "force-clear", false, "nova-create: first clear a stale instance_uuid (one Nova does not know) from an available node")
	f.StringVar(&o.serverID, "server-id", "", "nova-delete: server id (default: the node's instance)")
	f.BoolVar(&o.wait, "wait", false, "follow every operation to its end (exit 6 when one FAILED or was CANCELLED, 7 on --timeout)")
	f.DurationVar(&o.timeout, "timeout", 30*time.Minute, "how long --wait waits")
	o.node.bind(cmd)
}

// request checks the arguments (KIND, then devices) and flags and builds
// the StartOperation request; a usage error names what is wrong.
func (o *opStartFlags) request(args []string) (*ironlinkv1.StartOperationRequest, error) {
	kind, ok := opKinds[args[0]]
	if !ok {
		return nil, usageErrf("unknown operation kind %q: want one of %s", args[0], kindNames())
	}
	if strings.TrimSpace(o.reason) == "" {
		return nil, usageErrf("--reason is required: say why (it is kept with the operation)")
	}
	req := &ironlinkv1.StartOperationRequest{Kind: kind, Site: o.site, Reason: o.reason, Force: o.force}
	for _, a := range args[1:] {
		d, err := parseDeviceArg(a, o.site)
		if err != nil {
			return nil, err
		}
		req.Devices = append(req.Devices, d.ref())
	}
	if kind == ironlinkv1.OperationKind_OPERATION_KIND_ENROL {
		if o.nodesFile == "" {
			return nil, usageErrf("enrol needs --nodes FILE (a JSON array of node specs)")
		}
		nodes, err := readNodes(o.nodesFile)
		if err != nil {
			return nil, err
		}
		req.Nodes = nodes
	}
	p, err := o.params(kind)
	if err != nil {
		return nil, err
	}
	req.Params = p
	return req, nil
}

// params builds the operation's parameters of kind from the flags: clean
// steps, deploy's image and config drive, Nova's server, the server id.
func (o *opStartFlags) params(kind ironlinkv1.OperationKind) (*ironlinkv1.OperationParams, error) {
	p := &ironlinkv1.OperationParams{ServerId: o.serverID}
	for _, s := range o.cleanSteps {
		iface, step, ok := strings.Cut(s, ".")
		if !ok {
			return nil, usageErrf("--clean-step %q: want INTERFACE.STEP, e.g. deploy.erase_devices_metadata", s)
		}
		p.CleanSteps = append(p.CleanSteps, &ironlinkv1.CleanStep{Interface: iface, Step: step})
	}
	if kind == ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY {
		p.Deploy = &ironlinkv1.DeployParams{ImageSource: o.imageSource, ImageChecksum: o.imageChecksum, RootGb: o.rootGB}
		if o.userData != "" || len(o.sshKeys) > 0 {
			p.Deploy.ConfigDrive = &ironlinkv1.ConfigDrive{UserData: o.userData, SshKeys: o.sshKeys}
		}
	}
	if kind == ironlinkv1.OperationKind_OPERATION_KIND_VALIDATE {
		p.ValidationChecks = o.checks
	} else if len(o.checks) > 0 {
		return nil, usageErrf("--check is for validate only")
	}
	if kind == ironlinkv1.OperationKind_OPERATION_KIND_ADOPT {
		p.Adopt = &ironlinkv1.AdoptParams{ImageSource: o.imageSource, ImageChecksum: o.imageChecksum, RootGb: o.rootGB}
	}
	if kind == ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE {
		p.NovaCreate = &ironlinkv1.NovaCreateParams{Name: o.novaName, Flavor: o.novaFlavor, Image: o.novaImage, KeyName: o.keyName, UserData: o.userData, Networks: o.networks,
			ForceClear: o.forceClear, Template: o.template, Metadata: o.metadata}
	} else if o.forceClear {
		return nil, usageErrf("--force-clear is for nova-create only")
	}
	return p, o.node.params(kind, o.reason, p)
}

// startOperations sends req, prints the operations started and their
// group, and with wait follows them to their end (at most timeout).
func (a *app) startOperations(ctx context.Context, req *ironlinkv1.StartOperationRequest, wait bool, timeout time.Duration) error {
	c, err := a.connect()
	if err != nil {
		return err
	}
	cctx, cancel := c.call(ctx)
	resp, err := c.ops.StartOperation(cctx, req)
	cancel()
	if err != nil {
		return c.explain(err)
	}
	a.printOperations(resp.GetOperations(), false)
	fmt.Fprintf(a.opts.Stderr, "group %s: follow with `ironlink op list --group %s`\n", resp.GetGroupId(), resp.GetGroupId())
	if !wait {
		return nil
	}
	return a.waitOperations(ctx, c, resp.GetOperations(), timeout)
}

// readNodes reads a JSON array of NodeSpec (protojson) from path ("-": stdin),
// at most boundedread.ConfigLimit bytes (the hub takes 16 MiB requests).
func readNodes(path string) ([]*ironlinkv1.NodeSpec, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = boundedread.Read(os.Stdin, "standard input", boundedread.ConfigLimit)
	} else {
		b, err = boundedread.File(path, boundedread.ConfigLimit)
	}
	if err != nil {
		return nil, usageErrf("--nodes: %v", err)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, usageErrf("--nodes %s: want a JSON array of node specs: %v", path, err)
	}
	nodes := make([]*ironlinkv1.NodeSpec, len(raw))
	for i, r := range raw {
		nodes[i] = &ironlinkv1.NodeSpec{}
		if err := protojson.Unmarshal(r, nodes[i]); err != nil {
			return nil, usageErrf("--nodes %s: node %d: %v", path, i, err)
		}
	}
	return nodes, nil
}

// printOperations prints ops as a table (wide: with group and last error).
func (a *app) printOperations(ops []*ironlinkv1.Operation, wide bool) {
	header := []string{"OPERATION", "KIND", "SITE", "DEVICE", "STATE", "PROVISION STATE", "ATTEMPTS", "AGE"}
	if wide {
		header = append(header, "ACTOR", "REASON", "LAST ERROR")
	}
	t := newTable(a.opts.Stdout, "", header...)
	for _, o := range ops {
		state := opStateName(o.GetState())
		if o.GetCancelRequested() {
			state += " (cancelling)"
		}
		if o.GetForced() {
			state += " (forced)"
		}
		dev := o.GetDeviceName()
		if dev == "" {
			dev = o.GetDeviceId()
		}
		row := []string{o.GetOperationId(), opKindName(o.GetKind()), o.GetSite(), dev, state, o.GetProvisionState(),
			fmt.Sprint(o.GetAttempts()), a.age(o.GetCreateTime())}
		if wide {
			row = append(row, o.GetActor(), o.GetReason(), o.GetLastError())
		}
		t.row(row...)
	}
	t.flush()
}

// waitOperations polls every operation until each is final, printing state
// changes. All SUCCEEDED: nil; any FAILED or CANCELLED: ExitCommandFailed;
// timeout: ExitWaitTimeout.
func (a *app) waitOperations(ctx context.Context, c *client, ops []*ironlinkv1.Operation, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := map[string]string{}
	var failed []string
	open := slices.Clone(ops)
	for len(open) > 0 {
		var still []*ironlinkv1.Operation
		for _, o := range open {
			cctx, cancel := c.call(ctx)
			r, err := c.ops.GetOperation(cctx, &ironlinkv1.GetOperationRequest{OperationId: o.GetOperationId()})
			cancel()
			if err != nil {
				return c.explain(err)
			}
			cur := r.GetOperation()
			line := opStateName(cur.GetState()) + " " + cur.GetProvisionState()
			if last[cur.GetOperationId()] != line {
				last[cur.GetOperationId()] = line
				fmt.Fprintf(a.opts.Stdout, "%s %s %s: %s", cur.GetOperationId(), opKindName(cur.GetKind()), first(cur.GetDeviceName(), cur.GetDeviceId()), opStateName(cur.GetState()))
				if ps := cur.GetProvisionState(); ps != "" {
					fmt.Fprintf(a.opts.Stdout, " (%s)", ps)
				}
				if e := cur.GetLastError(); e != "" {
					fmt.Fprintf(a.opts.Stdout, ": %s", e)
				}
				fmt.Fprintln(a.opts.Stdout)
			}
			switch {
			case cur.GetState() == ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED:
			case opFinal(cur.GetState()):
				failed = append(failed, cur.GetOperationId()+" "+opStateName(cur.GetState()))
			default:
				still = append(still, cur)
			}
		}
		open = still
		if len(open) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return &Error{Code: ExitWaitTimeout, Msg: fmt.Sprintf("%d operations not finished within --timeout %s (they go on, PENDING or RUNNING at the site; follow with `ironlink op watch ID`)%s",
				len(open), timeout, a.pendingEnrolHint(ctx, c, open))}
		}
		select {
		case <-ctx.Done():
			return &Error{Code: ExitError, Msg: "interrupted"}
		case <-time.After(a.opts.PollInterval):
		}
	}
	if len(failed) > 0 {
		return &Error{Code: ExitCommandFailed, Msg: "operations did not succeed: " + strings.Join(failed, ", ")}
	}
	return nil
}

func (a *app) newOpGetCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:               "get OPERATION_ID",
		ValidArgsFunction: a.completeIDs(operationIDKind),
		Short:             "Show one operation with its steps",
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connectFor(output, "", outWide, outJSON, outYAML)
			if err != nil {
				return err
			}
			id, err := c.resolveID(cmd.Context(), operationIDKind, args[0])
			if err != nil {
				return err
			}
			cctx, cancel := c.call(cmd.Context())
			defer cancel()
			r, err := c.ops.GetOperation(cctx, &ironlinkv1.GetOperationRequest{OperationId: id})
			if err != nil {
				return c.explain(err)
			}
			if output == outJSON || output == outYAML {
				return writeProto(a.opts.Stdout, output, r.GetOperation())
			}
			a.describeOperation(r.GetOperation())
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output: wide, json, yaml")
	return cmd
}

// describeOperation prints an operation's fields and its steps.
func (a *app) describeOperation(o *ironlinkv1.Operation) {
	w := a.opts.Stdout
	t := newTable(w, "")
	for _, kv := range [][2]string{
		{"Operation:", o.GetOperationId()}, {"Group:", o.GetGroupId()}, {"Kind:", opKindName(o.GetKind())},
		{"Site:", o.GetSite()}, {"Device:", strings.TrimSpace(o.GetDeviceName() + " " + o.GetDeviceId())},
		{"State:", opStateName(o.GetState())}, {"Provision state:", o.GetProvisionState()},
		{"Cancel requested:", fmt.Sprint(o.GetCancelRequested())}, {"Forced:", fmt.Sprint(o.GetForced())},
		{"Attempts:", fmt.Sprint(o.GetAttempts())}, {"Server:", o.GetServerId()}, {"Actor:", o.GetActor()},
		{"Reason:", o.GetReason()}, {"Source:", o.GetSourceAddress()}, {"Created:", a.age(o.GetCreateTime())},
		{"Started:", a.age(o.GetStartTime())}, {"Ended:", a.age(o.GetEndTime())}, {"Last error:", o.GetLastError()},
	} {
		t.row(kv[0], kv[1])
	}
	t.flush()
	if len(o.GetSteps()) == 0 {
		return
	}
	fmt.Fprintln(w, "Steps:")
	st := newTable(w, "  ", "ATTEMPT", "STEP", "OBSERVED", "STARTED", "ENDED", "MESSAGE")
	for _, s := range o.GetSteps() {
		st.row(fmt.Sprint(s.GetAttempt()), s.GetName(), s.GetObservedState(), a.age(s.GetStartTime()), a.age(s.GetEndTime()), truncate(s.GetMessage(), 80))
		for _, r := range s.GetRequests() {
			st.row("", "  "+r.GetMethod(), requestSummary(r), a.age(r.GetTime()), "", truncate(r.GetError(), 80))
		}
	}
	st.flush()
}

// requestSummary is "PATH DETAIL → STATUS (N tries, attempt A)" for a step's request.
func requestSummary(r *ironlinkv1.StepRequest) string {
	s := strings.TrimSpace(r.GetPath()+" "+r.GetDetail()) + " → " + fmt.Sprint(r.GetStatus())
	if r.GetTries() > 1 {
		s += fmt.Sprintf(" (%d tries)", r.GetTries())
	}
	return s + fmt.Sprintf(" [attempt %d]", r.GetAttempt())
}

func (a *app) newOpCancelCommand() *cobra.Command {
	var reason string
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:               "cancel OPERATION_ID --reason TEXT",
		ValidArgsFunction: a.completeIDs(operationIDKind),
		Short:             "Cancel an operation (PENDING at once; RUNNING only from an Ironic \"* wait\" state)",
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return usageErrf("--reason is required: say why")
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			id, err := c.resolveID(cmd.Context(), operationIDKind, args[0])
			if err != nil {
				return err
			}
			cctx, cancel := c.call(cmd.Context())
			r, err := c.ops.CancelOperation(cctx, &ironlinkv1.CancelOperationRequest{OperationId: id, Reason: reason})
			cancel()
			if err != nil {
				return c.explain(err)
			}
			a.printOperations([]*ironlinkv1.Operation{r.GetOperation()}, false)
			if !wait || opFinal(r.GetOperation().GetState()) {
				return nil
			}
			err = a.waitOperations(cmd.Context(), c, []*ironlinkv1.Operation{r.GetOperation()}, timeout)
			var e *Error
			if errors.As(err, &e) && e.Code == ExitCommandFailed && strings.HasSuffix(e.Msg, "CANCELLED") {
				return nil // cancelled is what was asked for
			}
			return err
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (required)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the operation has ended")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long --wait waits")
	return cmd
}

func (a *app) newOpWatchCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:               "watch OPERATION_ID",
		ValidArgsFunction: a.completeIDs(operationIDKind),
		Short:             "Follow an operation until it ends (exit 6 when it FAILED or was CANCELLED)",
		Args:              cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connectFor(output, "", outJSON)
			if err != nil {
				return err
			}
			id, err := c.resolveID(cmd.Context(), operationIDKind, args[0])
			if err != nil {
				return err
			}
			stream, err := c.ops.WatchOperation(cmd.Context(), &ironlinkv1.WatchOperationRequest{OperationId: id})
			if err != nil {
				return c.explain(err)
			}
			var last *ironlinkv1.Operation
			for {
				m, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return c.explain(err)
				}
				o := m.GetOperation()
				last = o
				if output == outJSON {
					if err := writeProtoLine(a.opts.Stdout, o); err != nil {
						return err
					}
					continue
				}
				step := ""
				if n := len(o.GetSteps()); n > 0 {
					step = o.GetSteps()[n-1].GetName()
				}
				fmt.Fprintf(a.opts.Stdout, "%s  %-9s  %-16s  step %-20s  attempt %d", time.Now().UTC().Format("15:04:05"), opStateName(o.GetState()),
					cell(o.GetProvisionState()), cell(step), o.GetAttempts())
				if e := o.GetLastError(); e != "" {
					fmt.Fprintf(a.opts.Stdout, "  %s", e)
				}
				fmt.Fprintln(a.opts.Stdout)
			}
			if last != nil && last.GetState() != ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED {
				return &Error{Code: ExitCommandFailed, Msg: fmt.Sprintf("operation %s ended %s: %s", last.GetOperationId(), opStateName(last.GetState()), orDash(last.GetLastError()))}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output: json (one line per change)")
	return cmd
}

// pendingEnrolHint explains an ENROL still PENDING at a --wait timeout: on
// hubs without --enrol-key-file its BMC credentials stay in the memory of
// the hub replica that took the request, which alone can deliver it, on a
// link it holds (docs/reference/operations.md). It names the replica holding the site's link now; "" when
// no open operation is a pending enrolment.
func (a *app) pendingEnrolHint(ctx context.Context, c *client, open []*ironlinkv1.Operation) string {
	site := ""
	for _, o := range open {
		if o.GetKind() == ironlinkv1.OperationKind_OPERATION_KIND_ENROL && o.GetState() == ironlinkv1.OperationState_OPERATION_STATE_PENDING {
			site = o.GetSite()
			break
		}
	}
	if site == "" {
		return ""
	}
	where := ""
	cctx, cancel := c.call(ctx)
	defer cancel()
	if r, err := c.fleet.ListSites(cctx, &ironlinkv1.ListSitesRequest{}); err == nil {
		for _, st := range r.GetSites() {
			if st.GetName() == site && st.GetReplica() != "" {
				where = "the site's link is on replica " + st.GetReplica()
			}
		}
	}
	if where == "" {
		// The usual cause, whatever the hub's key: the satellite is away.
		return fmt.Sprintf(".\nSite %s has no link to the hub now (its satellite is not connected: see `ironlink get sites`): "+
			"the enrolment goes out when it links again, and `ironlink op watch ID` follows it. "+
			"(A hub without --enrol-key-file delivers it only once the link is on the replica that took the request; docs/reference/operations.md)", site)
	}
	return fmt.Sprintf(".\nA hub without --enrol-key-file keeps an enrolment's BMC credentials in the memory of the replica that took the request, "+
		"and the enrolment goes out only on a site link that replica holds; %s. "+
		"Behind a load balancer the request may have reached another replica: cancel it (`ironlink op cancel ID --reason ...`) and start it against the link's replica with --hub, or wait for the link to move. "+
		"With several replicas, give them all the same --enrol-key-file (docs/reference/operations.md) so that any of them delivers it", where)
}

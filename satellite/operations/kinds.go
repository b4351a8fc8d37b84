package operations

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/site"
)

// Ironic provision states (ironic/common/states.py; OPENSTACK.md §1.2).
const (
	stEnroll       = "enroll"
	stVerifying    = "verifying"
	stManageable   = "manageable"
	stInspecting   = "inspecting"
	stInspectWait  = "inspect wait"
	stInspectFail  = "inspect failed"
	stCleaning     = "cleaning"
	stCleanWait    = "clean wait"
	stCleanHold    = "clean hold"
	stCleanFail    = "clean failed"
	stAvailable    = "available"
	stDeploying    = "deploying"
	stDeployWait   = "wait call-back"
	stDeployHold   = "deploy hold"
	stDeployFail   = "deploy failed"
	stActive       = "active"
	stDeleting     = "deleting"
	stError        = "error"
	stRescueWait   = "rescue wait"
	stAdoptFail    = "adopt failed"
	stRescueFail   = "rescue failed"
	stUnrescueFail = "unrescue failed"
	stServiceFail  = "service failed"
)

// abortable are the "* wait" states Ironic aborts from (OperationService
// CancelOperation).
var abortable = []string{stCleanWait, stInspectWait, stDeployWait, stRescueWait}

// failed are Ironic's failure states plus error (OPENSTACK.md §1.2).
var failed = map[string]string{
	stCleanFail: "CleanFailed", stInspectFail: "InspectFailed", stDeployFail: "DeployFailed",
	stError: "ProvisionError", stAdoptFail: "AdoptFailed", stRescueFail: "RescueFailed",
	stUnrescueFail: "UnrescueFailed", stServiceFail: "ServiceFailed",
}

// ironicFailure ends the run with the node's failure state and last_error.
func ironicFailure(n *node) site.Result {
	msg := n.LastError
	if msg == "" {
		// The test bed's conductor has been seen to leave last_error null
		// (OPENSTACK.md §8): the state alone decides.
		msg = "node " + n.UUID + " is in " + n.ProvisionState + " (Ironic gave no last_error)"
	}
	return site.Failed(failed[n.ProvisionState], "%s", msg)
}

// pass reads the world once and takes at most one step towards the goal.
func (u *run) pass(ctx context.Context) site.Result {
	k := u.req.GetKind()
	if !u.checked {
		if err := u.preflight(ctx); err != nil {
			return stop(err)
		}
		u.checked = true
	}
	if k == ironlinkv1.OperationKind_OPERATION_KIND_ENROL {
		return u.enrol(ctx)
	}
	if k == ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE && time.Now().Before(u.retryAt) && !u.cancelRequested() {
		return u.waiting() // waiting to boot again: nothing to read until then
	}
	n, err := u.r.getNode(ctx, u.req.GetDeviceId())
	if errors.Is(err, errNotFound) {
		return site.Failed("NodeNotFound", "Ironic has no node %s", u.req.GetDeviceId())
	}
	if err != nil {
		return stop(err)
	}
	u.mu.Lock()
	u.deviceID = n.UUID
	u.provisionState = n.ProvisionState
	u.mu.Unlock()
	if u.cancelRequested() {
		if res, handled := u.tryCancel(ctx, n); handled {
			return res
		}
	}
	switch k {
	case ironlinkv1.OperationKind_OPERATION_KIND_INSPECT:
		return u.sameState(ctx, n, "inspect", nil, []string{stInspecting, stInspectWait})
	case ironlinkv1.OperationKind_OPERATION_KIND_CLEAN:
		steps := []map[string]any{}
		for _, s := range u.req.GetParams().GetCleanSteps() {
			args := map[string]any{}
			if s.GetArgs() != nil {
				args = s.GetArgs().AsMap()
			}
			steps = append(steps, map[string]any{"interface": s.GetInterface(), "step": s.GetStep(), "args": args})
		}
		return u.sameState(ctx, n, "clean", map[string]any{"clean_steps": steps}, []string{stCleaning, stCleanWait, stCleanHold})
	case ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE:
		return u.provide(ctx, n)
	case ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY:
		return u.deploy(ctx, n)
	case ironlinkv1.OperationKind_OPERATION_KIND_UNDEPLOY:
		return u.undeploy(ctx, n)
	case ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE:
		return u.novaCreate(ctx, n)
	case ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE:
		return u.novaDelete(ctx, n)
	}
	return site.Failed("InvalidArgument", "unknown kind %v", k)
}

// preflight checks, once per process and before any write, what only
// OpenStack can tell: the driver is enabled, the flavor and the image
// exist, Nova is there for NOVA_*. Failures are InvalidArgument.
func (u *run) preflight(ctx context.Context) error {
	switch u.req.GetKind() {
	case ironlinkv1.OperationKind_OPERATION_KIND_ENROL:
		names, err := u.r.ironic.Drivers(ctx)
		if err != nil {
			return err
		}
		if d := u.req.GetNode().GetDriver(); !slices.Contains(names, d) {
			return fail("InvalidArgument", "driver %q is not enabled in this site's Ironic (enabled: %s)", d, strings.Join(names, ", "))
		}
	case ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE:
		if u.r.nova == nil {
			return fail("NovaUnavailable", "this site has no Nova (no compute endpoint for the operations credential)")
		}
	}
	return nil
}

// tryCancel aborts from a wait state (handled: cancelled, or the abort's
// failure) or refuses the cancel (not handled: the pass goes on).
func (u *run) tryCancel(ctx context.Context, n *node) (site.Result, bool) {
	kind := u.req.GetKind()
	if kind != ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE && kind != ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE &&
		slices.Contains(abortable, n.ProvisionState) {
		u.step("abort", n.ProvisionState, "cancel requested: abort from "+n.ProvisionState)
		if err := u.r.ironic.SetProvisionState(ctx, n.UUID, "abort", nil); err != nil {
			if openstack.StatusCode(err) == http.StatusBadRequest || openstack.StatusCode(err) == http.StatusConflict {
				// The node moved on meanwhile: refuse and go on.
				u.refuseCancel(n)
				return site.Result{}, false
			}
			return stop(err), true
		}
		return cancelled, true
	}
	u.refuseCancel(n)
	return site.Result{}, false
}

func (u *run) refuseCancel(n *node) {
	u.mu.Lock()
	u.cancel = false
	u.mu.Unlock()
	u.log.Info("cancel refused: the node is not in a state Ironic can abort", "provision_state", n.ProvisionState)
	u.sendProgress(true)
}

// sameState reconciles INSPECT and CLEAN, which start and end in
// manageable: the marker says whether this operation's action was taken.
func (u *run) sameState(ctx context.Context, n *node, action string, args map[string]any, transient []string) site.Result {
	ps := n.ProvisionState
	id := u.req.GetOperationId()
	switch {
	case ps == stManageable && actionTaken(n, id, action):
		msg := action + " finished"
		if action == "inspect" {
			msg += ": " + inspected(n.Properties)
		}
		u.step("wait-manageable", ps, msg)
		return site.Done()
	case ps == stManageable:
		if markerOf(n).OperationID != id || markerOf(n).Action != action || markerOf(n).Since != n.ProvisionUpdatedAt {
			u.step("mark", ps, "")
			if err := u.r.mark(ctx, n, id, action); err != nil {
				return stop(err)
			}
		}
		u.step(action, ps, "")
		if err := u.r.ironic.SetProvisionState(ctx, n.UUID, action, args); err != nil {
			if openstack.StatusCode(err) == http.StatusBadRequest {
				return site.Failed("IronicRejected", "%s", ironicMessage(err))
			}
			return stop(err)
		}
		return retryNow
	case slices.Contains(transient, ps):
		u.step("wait-manageable", ps, "")
		return u.waiting()
	case failed[ps] != "":
		return ironicFailure(n)
	}
	return site.Failed("InvalidState", "%s starts from manageable; node %s is %s", strings.ToUpper(action), n.UUID, ps)
}

// provide reconciles PROVIDE: manageable → cleaning → available.
func (u *run) provide(ctx context.Context, n *node) site.Result {
	switch ps := n.ProvisionState; {
	case ps == stAvailable:
		u.step("wait-available", ps, "available")
		return site.Done()
	case ps == stManageable:
		u.step("provide", ps, "")
		if err := u.r.ironic.SetProvisionState(ctx, n.UUID, "provide", nil); err != nil {
			return stop(err)
		}
		return retryNow
	case ps == stCleaning || ps == stCleanWait || ps == stCleanHold:
		u.step("wait-available", ps, "")
		return u.waiting()
	case failed[ps] != "":
		return ironicFailure(n)
	default:
		return site.Failed("InvalidState", "PROVIDE starts from manageable; node %s is %s", n.UUID, ps)
	}
}

// deploy reconciles DEPLOY: instance_info, then available → deploying →
// active.
func (u *run) deploy(ctx context.Context, n *node) site.Result {
	d := u.req.GetParams().GetDeploy()
	switch ps := n.ProvisionState; {
	case ps == stActive:
		if got, _ := n.InstanceInfo["image_source"].(string); got != d.GetImageSource() {
			return site.Failed("InvalidState", "node %s is active with image_source %q, not %q", n.UUID, got, d.GetImageSource())
		}
		u.step("wait-active", ps, "active")
		return site.Done()
	case ps == stAvailable:
		if n.InstanceUUID != "" {
			return site.Failed("InvalidState", "node %s is reserved by instance %s", n.UUID, n.InstanceUUID)
		}
		want := map[string]any{"image_source": d.GetImageSource()}
		if d.GetImageChecksum() != "" {
			want["image_checksum"] = d.GetImageChecksum()
		}
		if d.GetRootGb() > 0 {
			want["root_gb"] = fmt.Sprint(d.GetRootGb())
		} else if lg, ok := n.Properties["local_gb"]; ok {
			want["root_gb"] = fmt.Sprint(lg)
		}
		if len(d.GetCapabilities()) > 0 {
			caps := map[string]any{}
			for k, v := range d.GetCapabilities() {
				caps[k] = v
			}
			want["capabilities"] = caps
		}
		var ops []patchOp
		for _, k := range sortedKeys(want) {
			if fmt.Sprint(n.InstanceInfo[k]) != fmt.Sprint(want[k]) {
				ops = append(ops, patchOp{Op: "add", Path: "/instance_info/" + k, Value: want[k]})
			}
		}
		if len(ops) > 0 {
			u.step("set-instance-info", ps, "")
			if _, err := u.r.ironic.PatchNode(ctx, n.UUID, ops); err != nil {
				if openstack.StatusCode(err) == http.StatusBadRequest {
					return site.Failed("IronicRejected", "%s", ironicMessage(err))
				}
				return stop(err)
			}
		}
		var extra map[string]any
		if cd := d.GetConfigDrive(); cd != nil {
			keys := map[string]any{}
			for i, k := range cd.GetSshKeys() {
				keys[fmt.Sprintf("key-%d", i)] = k
			}
			cdv := map[string]any{"meta_data": map[string]any{"public_keys": keys, "uuid": n.UUID, "name": n.Name}}
			if cd.GetUserData() != "" {
				cdv["user_data"] = cd.GetUserData()
			}
			extra = map[string]any{"configdrive": cdv}
		}
		u.step("deploy", ps, "")
		if err := u.r.ironic.SetProvisionState(ctx, n.UUID, "active", extra); err != nil {
			if openstack.StatusCode(err) == http.StatusBadRequest {
				return site.Failed("IronicRejected", "%s", ironicMessage(err))
			}
			return stop(err)
		}
		return retryNow
	case ps == stDeploying || ps == stDeployWait || ps == stDeployHold:
		u.step("wait-active", ps, "")
		return u.waiting()
	case failed[ps] != "":
		return ironicFailure(n)
	default:
		return site.Failed("InvalidState", "DEPLOY starts from available; node %s is %s", n.UUID, ps)
	}
}

// undeploy reconciles UNDEPLOY: active → deleting → cleaning → available.
func (u *run) undeploy(ctx context.Context, n *node) site.Result {
	switch ps := n.ProvisionState; {
	case ps == stAvailable:
		u.step("wait-available", ps, "available")
		return site.Done()
	case ps == stActive || ps == stDeployFail:
		if n.InstanceUUID != "" {
			return site.Failed("InvalidState", "node %s carries Nova instance %s: use NOVA_DELETE", n.UUID, n.InstanceUUID)
		}
		u.step("undeploy", ps, "")
		if err := u.r.ironic.SetProvisionState(ctx, n.UUID, "deleted", nil); err != nil {
			return stop(err)
		}
		return retryNow
	case ps == stDeleting || ps == stCleaning || ps == stCleanWait:
		u.step("wait-available", ps, "")
		return u.waiting()
	case failed[ps] != "":
		return ironicFailure(n)
	default:
		return site.Failed("InvalidState", "UNDEPLOY starts from active or deploy failed; node %s is %s", n.UUID, ps)
	}
}

// enrol reconciles ENROL: node by name, ports, traits, manage.
func (u *run) enrol(ctx context.Context) site.Result {
	spec := u.req.GetNode()
	id := u.req.GetOperationId()
	ident := u.deviceIDNow()
	if ident == "" {
		ident = spec.GetName()
	}
	n, err := u.r.getNode(ctx, ident)
	if errors.Is(err, errNotFound) {
		u.step("create-node", "", "")
		body := map[string]any{"name": spec.GetName(), "driver": spec.GetDriver(),
			"extra": map[string]any{markerKey: marker{OperationID: id, Action: "create"}}}
		if len(spec.GetDriverInfo()) > 0 {
			body["driver_info"] = spec.GetDriverInfo()
		}
		if spec.GetResourceClass() != "" {
			body["resource_class"] = spec.GetResourceClass()
		}
		if spec.GetProperties() != nil {
			body["properties"] = spec.GetProperties().AsMap()
		}
		if spec.GetOwner() != "" {
			body["owner"] = spec.GetOwner()
		}
		if spec.GetLessee() != "" {
			body["lessee"] = spec.GetLessee()
		}
		created, err := u.r.createNode(ctx, body)
		if openstack.StatusCode(err) == http.StatusConflict {
			return retryNow // created meanwhile (another process): take it over
		}
		if openstack.StatusCode(err) == http.StatusBadRequest {
			return site.Failed("InvalidArgument", "Ironic refused the node: %s", ironicMessage(err))
		}
		if err != nil {
			return stop(err)
		}
		u.setDevice(created.UUID)
		u.step("create-node", created.ProvisionState, "node created (uuid "+created.UUID+")")
		return retryNow
	}
	if err != nil {
		return stop(err)
	}
	u.setDevice(n.UUID)
	u.mu.Lock()
	u.provisionState = n.ProvisionState
	u.mu.Unlock()
	if n.Driver != spec.GetDriver() {
		return site.Failed("NodeNameTaken", "node %s named %q exists with driver %s, not %s", n.UUID, n.Name, n.Driver, spec.GetDriver())
	}
	if u.cancelRequested() {
		u.refuseCancel(n) // enrolment has no wait state to abort
	}
	if !u.portsDone {
		if err := u.ensurePorts(ctx, n); err != nil {
			return stop(err)
		}
		if err := u.ensureTraits(ctx, n); err != nil {
			return stop(err)
		}
		u.portsDone = true
	}
	switch ps := n.ProvisionState; {
	case ps == stManageable:
		u.step("wait-manageable", ps, "manageable")
		return site.Done()
	case ps == stEnroll:
		m := markerOf(n)
		if m.OperationID == id && m.Action == "manage" && m.Since != n.ProvisionUpdatedAt {
			return site.Failed("VerificationFailed", "verification failed, the node is back in enroll: %s", n.LastError)
		}
		if m.OperationID != id || m.Action != "manage" {
			if err := u.r.mark(ctx, n, id, "manage"); err != nil {
				return stop(err)
			}
		}
		u.step("manage", ps, "")
		if err := u.r.ironic.SetProvisionState(ctx, n.UUID, "manage", nil); err != nil {
			return stop(err)
		}
		return retryNow
	case ps == stVerifying:
		u.step("wait-manageable", ps, "")
		return u.waiting()
	case failed[ps] != "":
		return site.Failed("InvalidState", "node %s named %q exists in %s", n.UUID, n.Name, ps)
	case ps == stAvailable || ps == stActive:
		u.step("wait-manageable", ps, "node "+n.UUID+" exists and is already "+ps+": taken over")
		return site.Done()
	default:
		u.step("wait-manageable", ps, "")
		return u.waiting()
	}
}

func (u *run) deviceIDNow() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.deviceID
}

func (u *run) setDevice(id string) {
	u.mu.Lock()
	u.deviceID = id
	u.mu.Unlock()
}

// ensurePorts creates the spec's ports the node lacks (by MAC, case
// insensitive).
func (u *run) ensurePorts(ctx context.Context, n *node) error {
	want := u.req.GetNode().GetPorts()
	if len(want) == 0 {
		return nil
	}
	have, err := u.r.ironic.ListPorts(ctx, n.UUID)
	if err != nil {
		return err
	}
	for _, p := range want {
		mac := strings.ToLower(p.GetAddress())
		if slices.ContainsFunc(have, func(h port) bool { return strings.EqualFold(h.Address, mac) }) {
			continue
		}
		u.step("create-ports", n.ProvisionState, "")
		if err := u.r.ironic.CreatePort(ctx, n.UUID, mac, p.GetPxeEnabled()); err != nil {
			if openstack.StatusCode(err) == http.StatusConflict {
				return fail("PortConflict", "MAC %s: %s", mac, ironicMessage(err))
			}
			if openstack.StatusCode(err) == http.StatusBadRequest {
				return fail("InvalidArgument", "port %s: %s", mac, ironicMessage(err))
			}
			return err
		}
	}
	return nil
}

// ensureTraits adds the spec's traits the node lacks (keeping the others).
func (u *run) ensureTraits(ctx context.Context, n *node) error {
	want := u.req.GetNode().GetTraits()
	if len(want) == 0 {
		return nil
	}
	have, err := u.r.ironic.NodeTraits(ctx, n.UUID)
	if err != nil {
		return err
	}
	all := slices.Clone(have)
	for _, t := range want {
		if !slices.Contains(all, t) {
			all = append(all, t)
		}
	}
	if len(all) == len(have) {
		return nil
	}
	slices.Sort(all)
	u.step("set-traits", n.ProvisionState, "")
	if err := u.r.ironic.SetTraits(ctx, n.UUID, all); err != nil {
		if openstack.StatusCode(err) == http.StatusBadRequest {
			return fail("InvalidArgument", "traits: %s", ironicMessage(err))
		}
		return err
	}
	return nil
}

// novaCreate reconciles NOVA_CREATE: find or boot the server on the node,
// wait for ACTIVE and the node's instance_uuid.
func (u *run) novaCreate(ctx context.Context, n *node) site.Result {
	p := u.req.GetParams().GetNovaCreate()
	srv, err := u.findServer(ctx, n, p.GetName())
	if err != nil {
		return stop(err)
	}
	if srv == nil {
		if time.Now().Before(u.retryAt) {
			u.step("wait-schedulable", n.ProvisionState, "")
			return u.waiting()
		}
		if n.ProvisionState != stAvailable || n.Maintenance {
			return site.Failed("InvalidState", "NOVA_CREATE needs an available node out of maintenance; node %s is %s (maintenance %v)", n.UUID, n.ProvisionState, n.Maintenance)
		}
		if n.PowerState == "" {
			// Nova's Ironic driver reports a node without a power state as
			// unavailable (reserved in Placement): no boot could land on it.
			return site.Failed("PowerStateUnknown", "node %s has no power state: Nova will not schedule onto it until Ironic knows it (fake-hardware never reads one; set it with a power action)", n.UUID)
		}
		if u.flavor == nil { // resolved once per process
			fl, err := u.r.findFlavor(ctx, p.GetFlavor(), n.ResourceClass)
			if errors.Is(err, errNotFound) {
				return site.Failed("InvalidArgument", "%v", err)
			}
			if err != nil {
				return stop(err)
			}
			img, err := u.r.findImage(ctx, p.GetImage())
			if errors.Is(err, errNotFound) {
				return site.Failed("InvalidArgument", "%v", err)
			}
			if err != nil {
				return stop(err)
			}
			u.flavor, u.imageID = fl, img
		}
		fl, img := u.flavor, u.imageID
		u.step("boot-server", n.ProvisionState, "flavor "+fl.Name)
		u.boots++
		sid, err := u.r.nova.CreateServer(ctx, nova.CreateServerOpts{Name: p.GetName(), FlavorID: fl.ID, ImageID: img,
			KeyName: p.GetKeyName(), UserData: p.GetUserData(), Networks: p.GetNetworks(), NodeUUID: n.UUID})
		if openstack.StatusCode(err) == http.StatusBadRequest && strings.Contains(string(openstack.ResponseBody(err)), "Compute host "+n.UUID+" could not be found") {
			// nova-compute has not picked the node up yet (its resource
			// tracker finds new Ironic nodes every minute or so).
			u.retryAt = time.Now().Add(u.r.cfg.NoValidHostWait / 2)
			u.step("wait-hypervisor", n.ProvisionState, "Nova does not know node "+n.UUID+" as a hypervisor yet")
			return u.waiting()
		}
		if code := openstack.StatusCode(err); code == http.StatusBadRequest || code == http.StatusForbidden || code == http.StatusNotFound {
			return site.Failed("NovaRejected", "%v", err)
		}
		if err != nil {
			return stop(err) // the next pass looks for the server by name
		}
		u.mu.Lock()
		u.serverID = sid
		u.mu.Unlock()
		u.serverStep("boot-server", "BUILD", "", "server "+sid)
		return u.waiting()
	}
	u.mu.Lock()
	u.serverID = srv.ID
	u.mu.Unlock()
	switch srv.Status {
	case "ERROR":
		if srv.FaultMessage == "" {
			if s, err := u.r.getServer(ctx, srv.ID); err == nil {
				srv = s
			}
		}
		fault := srv.FaultMessage
		if srv.TaskState == "deleting" {
			u.serverStep("delete-unscheduled-server", srv.Status, n.ProvisionState, "")
			return u.waiting()
		}
		if srv.HypervisorHostname == "" && strings.Contains(fault, "No valid host") && u.boots < maxBoots {
			// Nova's resource view of a node lags behind Ironic (its
			// resource tracker reports a newly available node to Placement
			// within a minute or so): the server never reached the node, so
			// it is deleted and the boot tried again after a while.
			u.serverStep("delete-unscheduled-server", srv.Status, n.ProvisionState, "No valid host (Nova has not caught up with the node yet): deleting server "+srv.ID+" to boot again")
			if err := u.r.nova.DeleteServer(ctx, srv.ID); err != nil {
				return stop(err)
			}
			u.retryAt = time.Now().Add(u.r.cfg.NoValidHostWait)
			u.step("wait-schedulable", n.ProvisionState, "boot again at "+u.retryAt.UTC().Format(time.RFC3339))
			return u.waiting()
		}
		msg := "server " + srv.ID + " is in ERROR"
		if fault != "" {
			msg += ": " + fault
		}
		return site.Failed("ServerError", "%s", msg)
	case "ACTIVE":
		if n.InstanceUUID == srv.ID && n.ProvisionState == stActive {
			u.serverStep("wait-active", "ACTIVE", n.ProvisionState, "server "+srv.ID+" active on node "+n.UUID)
			return site.Done()
		}
	}
	u.serverStep("wait-active", srv.Status, n.ProvisionState, "node "+n.ProvisionState)
	return u.waiting()
}

// maxBoots bounds the server boots of one NOVA_CREATE in one process (a
// boot that ended in "No valid host" before reaching the node is retried).
const maxBoots = 10

// findServer returns the server of this operation: the node's instance
// (it must have the requested name) or a server of that name that is not on
// another node; nil when there is none yet.
func (u *run) findServer(ctx context.Context, n *node, name string) (*server, error) {
	if n.InstanceUUID != "" {
		s, err := u.r.getServer(ctx, n.InstanceUUID)
		if err != nil && !errors.Is(err, errNotFound) {
			return nil, err
		}
		if s != nil && s.Name == name {
			return s, nil
		}
		if s != nil {
			return nil, fail("InvalidState", "node %s already carries server %s (%s)", n.UUID, s.ID, s.Name)
		}
	}
	list, err := u.r.nova.ServersNamed(ctx, name)
	if err != nil {
		return nil, err
	}
	for i, s := range list {
		if s.HypervisorHostname == "" || s.HypervisorHostname == n.UUID {
			return &list[i], nil
		}
	}
	if len(list) > 0 {
		return nil, fail("ServerNameTaken", "a server named %q exists on another node (%s)", name, list[0].HypervisorHostname)
	}
	return nil, nil
}

// novaDelete reconciles NOVA_DELETE: delete the server, wait for Nova to
// forget it and the node to be available again.
func (u *run) novaDelete(ctx context.Context, n *node) site.Result {
	sid := u.req.GetParams().GetServerId()
	if sid == "" {
		sid = u.serverIDNow()
	}
	if sid == "" {
		sid = n.InstanceUUID
	}
	if sid == "" {
		if n.ProvisionState == stAvailable {
			u.step("wait-available", n.ProvisionState, "no server on the node")
			return site.Done()
		}
		u.step("wait-available", n.ProvisionState, "")
		if failed[n.ProvisionState] != "" {
			return ironicFailure(n)
		}
		return u.waiting()
	}
	u.mu.Lock()
	u.serverID = sid
	u.mu.Unlock()
	s, err := u.r.getServer(ctx, sid)
	if err != nil && !errors.Is(err, errNotFound) {
		return stop(err)
	}
	if s != nil {
		if s.HypervisorHostname != "" && s.HypervisorHostname != n.UUID {
			return site.Failed("InvalidState", "server %s runs on node %s, not %s", sid, s.HypervisorHostname, n.UUID)
		}
		if s.TaskState != "deleting" {
			u.serverStep("delete-server", s.Status, n.ProvisionState, "server "+sid)
			if err := u.r.nova.DeleteServer(ctx, sid); err != nil {
				return stop(err)
			}
			return u.waiting()
		}
		u.serverStep("wait-deleted", s.Status, n.ProvisionState, "")
		return u.waiting()
	}
	switch ps := n.ProvisionState; {
	case ps == stAvailable && n.InstanceUUID == "":
		u.step("wait-available", ps, "server gone, node available")
		return site.Done()
	case failed[ps] != "":
		return ironicFailure(n)
	default:
		u.step("wait-available", ps, "")
		return u.waiting()
	}
}

func (u *run) serverIDNow() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.serverID
}

// inspected summarises the properties inspection fills in, for the final
// step's message (the device's facts do not carry them).
func inspected(props map[string]any) string {
	var parts []string
	for _, k := range []string{"cpus", "cpu_arch", "memory_mb", "local_gb"} {
		if v, ok := props[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	if len(parts) == 0 {
		return "no properties reported"
	}
	return strings.Join(parts, " ")
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

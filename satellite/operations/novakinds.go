package operations

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/site"
)

// novaCreate reconciles NOVA_CREATE: find or boot the server on the node,
// wait for ACTIVE and the node's instance_uuid.
func (u *run) novaCreate(ctx context.Context, n *node) site.Result {
	if res, handled := u.staleInstance(ctx, n); handled {
		return res
	}
	srv, err := u.findServer(ctx, n, u.req.GetParams().GetNovaCreate().GetName())
	if err != nil {
		return stop(err)
	}
	if srv == nil {
		return u.bootServer(ctx, n)
	}
	u.mu.Lock()
	u.serverID = srv.ID
	u.mu.Unlock()
	return u.watchServer(ctx, n, srv)
}

// staleInstance handles an available node whose instance_uuid names a
// server Nova does not know (a stale record: nova-compute would refuse the
// node and the server would end in ERROR after its retries). With
// force_clear the instance_uuid is removed as the step
// "clear-stale-instance" and the next pass boots; without it the operation
// fails StaleInstance before anything is created. handled false: the node
// has no such instance_uuid.
func (u *run) staleInstance(ctx context.Context, n *node) (site.Result, bool) {
	if n.InstanceUUID == "" || n.ProvisionState != stAvailable {
		return site.Result{}, false
	}
	_, err := u.r.getServer(ctx, n.InstanceUUID)
	if err == nil {
		return site.Result{}, false
	}
	if !errors.Is(err, errNotFound) {
		return stop(err), true
	}
	if !u.req.GetParams().GetNovaCreate().GetForceClear() {
		return site.Failed("StaleInstance", "node %s has instance_uuid %s that Nova does not know: clear it first (openstack baremetal node unset --instance-uuid %s) or use --force-clear",
			n.UUID, n.InstanceUUID, n.UUID), true
	}
	u.step("clear-stale-instance", n.ProvisionState, "instance_uuid "+n.InstanceUUID+" names no Nova server: removing it")
	if _, err := u.patchNode(ctx, n.UUID, []patchOp{{Op: "remove", Path: "/instance_uuid"}}); err != nil {
		if openstack.StatusCode(err) == http.StatusBadRequest {
			return site.Failed("StaleInstance", "node %s: clearing the stale instance_uuid %s failed: %s", n.UUID, n.InstanceUUID, requestError(err)), true
		}
		return stop(err), true
	}
	return u.waiting(), true
}

// bootServer boots the operation's server on n, once the node can take it
// and Nova knows it as a hypervisor.
func (u *run) bootServer(ctx context.Context, n *node) site.Result {
	p := u.req.GetParams().GetNovaCreate()
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
		if res, ok := u.resolveFlavorAndImage(ctx, n); !ok {
			return res
		}
	}
	fl, img := u.flavor, u.imageID
	u.step("boot-server", n.ProvisionState, "flavor "+fl.Name)
	u.boots++
	sid, err := u.createServer(ctx, nova.CreateServerOpts{Name: p.GetName(), FlavorID: fl.ID, ImageID: img,
		KeyName: p.GetKeyName(), UserData: p.GetUserData(), Networks: p.GetNetworks(), NodeUUID: n.UUID, Metadata: p.GetMetadata()})
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

// resolveFlavorAndImage sets u.flavor and u.imageID; ok false with the
// Result that ends the pass when it cannot.
func (u *run) resolveFlavorAndImage(ctx context.Context, n *node) (site.Result, bool) {
	p := u.req.GetParams().GetNovaCreate()
	fl, err := u.r.findFlavor(ctx, p.GetFlavor(), n.ResourceClass)
	if errors.Is(err, errNotFound) {
		return site.Failed("InvalidArgument", "%v", err), false
	}
	if err != nil {
		return stop(err), false
	}
	img, err := u.r.findImage(ctx, p.GetImage())
	if errors.Is(err, errNotFound) {
		return site.Failed("InvalidArgument", "%v", err), false
	}
	if err != nil {
		return stop(err), false
	}
	u.flavor, u.imageID = fl, img
	return site.Result{}, true
}

// watchServer follows the operation's server srv to ACTIVE on n; a boot
// that ended in "No valid host" before reaching the node is deleted and
// tried again.
func (u *run) watchServer(ctx context.Context, n *node, srv *server) site.Result {
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
			if err := u.deleteServer(ctx, srv.ID); err != nil {
				return stop(err)
			}
			u.retryAt = time.Now().Add(u.r.cfg.NoValidHostWait)
			u.step("wait-schedulable", n.ProvisionState, "boot again at "+u.retryAt.UTC().Format(time.RFC3339))
			return u.waiting()
		}
		return u.serverFailed(ctx, n, srv)
	case "ACTIVE":
		if n.InstanceUUID == srv.ID && n.ProvisionState == stActive {
			u.serverStep("wait-active", "ACTIVE", n.ProvisionState, "server "+srv.ID+" active on node "+n.UUID)
			return site.Done()
		}
	}
	u.serverStep("wait-active", srv.Status, n.ProvisionState, "node "+n.ProvisionState)
	return u.waiting()
}

// maxServerDeletes bounds the extra tries to delete a server in ERROR
// after Nova answered 5xx, serverDeleteWait apart.
const (
	maxServerDeletes = 5
	serverDeleteWait = 2 * time.Second
)

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
			if err := u.deleteServer(ctx, sid); err != nil {
				if openstack.StatusCode(err) >= 500 && u.serverDeletes < maxServerDeletes {
					// As in serverFailed: a delete is idempotent, and Nova
					// answers 500 on SQLite lock contention (test bed).
					u.serverDeletes++
					return site.RetryAfter(serverDeleteWait, "NovaDeleteFailed")
				}
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

// serverFailed ends a NOVA_CREATE whose server went to ERROR: the error
// names Nova's fault (fault.message) and the node's last_error (read
// again: Ironic sets it when the deploy fails), and the server is deleted
// so nothing half-made stays in Nova — or the error says it is left there
// and why.
func (u *run) serverFailed(ctx context.Context, n *node, srv *server) site.Result {
	msg := "server " + srv.ID + " (" + srv.Name + ") went to ERROR"
	if srv.FaultMessage != "" {
		msg += "; Nova's fault: " + truncate(srv.FaultMessage, 1024)
	} else {
		msg += "; Nova gave no fault"
	}
	if fresh, err := u.r.getNode(ctx, n.UUID); err == nil {
		n = fresh
	}
	if n.LastError != "" {
		msg += "; node " + n.UUID + " last_error: " + truncate(n.LastError, 1024)
	} else {
		msg += "; node " + n.UUID + " has no last_error (" + n.ProvisionState + ")"
	}
	u.serverStep("delete-failed-server", srv.Status, n.ProvisionState, "deleting server "+srv.ID+" in ERROR")
	if err := u.deleteServer(ctx, srv.ID); err != nil {
		if openstack.StatusCode(err) >= 500 && u.serverDeletes < maxServerDeletes {
			// A delete is idempotent: a 500 (seen from Nova on SQLite
			// lock contention) is tried again on a later pass.
			u.serverDeletes++
			return site.RetryAfter(serverDeleteWait, "NovaDeleteFailed")
		}
		return site.Failed("ServerError", "%s; the server is left in Nova in ERROR: deleting it failed: %s", msg, requestError(err))
	}
	return site.Failed("ServerError", "%s; the server was deleted", msg)
}

package operations

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/site"
)

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
			"extra": map[string]any{markerKey: marker{OperationID: id, Action: "create", Created: true}}}
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
		created, err := u.createNode(ctx, body)
		if openstack.StatusCode(err) == http.StatusConflict {
			return retryNow // created meanwhile (another process): take it over
		}
		if openstack.StatusCode(err) == http.StatusBadRequest {
			return site.Failed("InvalidArgument", "Ironic refused the node: %s", ironic.Message(err))
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
			if err := u.mark(ctx, n, "manage"); err != nil {
				return stop(err)
			}
		}
		u.step("manage", ps, "")
		if err := u.setProvision(ctx, n.UUID, "manage", nil); err != nil {
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
		if err := u.createPort(ctx, n.UUID, mac, p.GetPxeEnabled()); err != nil {
			if openstack.StatusCode(err) == http.StatusConflict {
				return u.portConflict(ctx, n, mac, err)
			}
			if openstack.StatusCode(err) == http.StatusBadRequest {
				return fail("InvalidArgument", "port %s: %s", mac, ironic.Message(err))
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
	if err := u.setTraits(ctx, n.UUID, all); err != nil {
		if openstack.StatusCode(err) == http.StatusBadRequest {
			return fail("InvalidArgument", "traits: %s", ironic.Message(err))
		}
		return err
	}
	return nil
}

// portConflict ends an enrolment whose port MAC another port has (Ironic's
// 409): it names the port and node that own the MAC (GET
// /v1/ports?address=), deletes the node when this operation created it
// (its marker says so) and otherwise says what it leaves where.
func (u *run) portConflict(ctx context.Context, n *node, mac string, cause error) error {
	owner := ""
	if p, found, err := u.r.ironic.PortByAddress(ctx, mac); err != nil {
		owner = " (looking up its owner failed: " + err.Error() + ")"
	} else if found {
		owner = " (port " + p.UUID + " of node " + p.NodeUUID
		if o, err := u.r.getNode(ctx, p.NodeUUID); err == nil && o.Name != "" {
			owner += " " + o.Name
		}
		owner += ")"
	}
	msg := "MAC " + mac + " belongs to another port" + owner + ": " + ironic.Message(cause)
	m := markerOf(n)
	if m.OperationID != u.req.GetOperationId() || !m.Created {
		return fail("PortConflict", "%s; node %s (%s) was not created by this operation and is left as it was, in %s", msg, n.UUID, n.Name, n.ProvisionState)
	}
	u.step("delete-node", n.ProvisionState, "the enrolment cannot finish: deleting node "+n.UUID+" it created")
	if err := u.deleteNode(ctx, n.UUID); err != nil {
		return fail("PortConflict", "%s; node %s (%s) created by this operation is left in %s: deleting it failed: %s",
			msg, n.UUID, n.Name, n.ProvisionState, requestError(err))
	}
	return fail("PortConflict", "%s; node %s (%s) created by this operation was deleted", msg, n.UUID, n.Name)
}

package site

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/nova"
)

// This file is the Fixture's Ironic provision state machine (docs/design/openstack.md
// §1.2; Ironic's ironic/common/states.py) and Nova's server create and
// delete on a chosen node, for the operations runner's tests.
//
// A provision action sets the first state of its transition at once, as
// Ironic does when it answers 202; every NodeDetail read then moves the node
// one state further (deterministic, no clock), unless the node is held
// (Hold) in a "* wait" state. Writes to a node locked with Lock answer 409
// NodeLocked, as Ironic does beyond the client's retry budget; a target
// the current state does not allow answers 400 with Ironic's faultstring.

// Method names of the provisioning calls, recorded in Call.Method and
// matched by Fixture.Fail.
const (
	MethodNodeDetail        = "NodeDetail"
	MethodCreateNode        = "CreateNode"
	MethodListPorts         = "ListPorts"
	MethodCreatePort        = "CreatePort"
	MethodSetTraits         = "SetTraits"
	MethodPatchNode         = "PatchNode"
	MethodSetProvisionState = "SetProvisionState"
	MethodDrivers           = "Drivers"
	MethodServersNamed      = "ServersNamed"
	MethodFlavor            = "Flavor"
	MethodFlavors           = "Flavors"
	MethodCreateServer      = "CreateServer"
	MethodDeleteServer      = "DeleteServer"
	MethodImageIDs          = "ImageIDs"
	MethodDeleteNode        = "DeleteNode"
	MethodPortByAddress     = "PortByAddress"
)

// provisioning is what the Fixture keeps of a node beyond ironic.Node.
type provisioning struct {
	driver       string
	extra        map[string]any
	instanceInfo map[string]any
	properties   map[string]any
	lastError    string
	updated      int // provision_updated_at, in seconds after fixtureEpoch
	ports        []ironic.Port
	path         []string  // the states still to pass through
	failNext     string    // last_error of the next action, which then fails
	failTarget   string    // the target failNext applies to ("" any)
	held         bool      // stays in a wait state until Hold(false)
	locked       string    // conductor holding the node ("" = free)
	failBoot     [2]string // Nova fault and node last_error of the next boot, which then fails
	powerTarget  string    // target_power_state of a power change in progress ("" at rest)
	powerSeen    bool      // a read has shown powerTarget: the next one settles it
}

var fixtureEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// transitions maps a provision target to the states it passes through from
// each state it may start in (Ironic's state machine, the operations
// runner's subset).
var transitions = map[string]map[string][]string{
	"manage": {"enroll": {"verifying", "manageable"}, "inspect failed": {"manageable"},
		"clean failed": {"manageable"}, "adopt failed": {"manageable"}, "available": {"manageable"}},
	"inspect": {"manageable": {"inspecting", "inspect wait", "manageable"}, "inspect failed": {"inspecting", "inspect wait", "manageable"}},
	"clean":   {"manageable": {"cleaning", "clean wait", "manageable"}},
	"provide": {"manageable": {"cleaning", "clean wait", "available"}},
	"active":  {"available": {"deploying", "wait call-back", "active"}},
	"deleted": {"active": {"deleting", "cleaning", "available"}, "deploy failed": {"deleting", "cleaning", "available"}, "error": {"deleting", "cleaning", "available"}},
	"rebuild": {"active": {"deploying", "wait call-back", "active"}, "deploy failed": {"deploying", "wait call-back", "active"}},
	"adopt":   {"manageable": {"adopting", "active"}, "adopt failed": {"adopting", "active"}},
	"abort":   {"clean wait": {"clean failed"}, "inspect wait": {"inspect failed"}, "wait call-back": {"deploy failed"}, "rescue wait": {"rescue failed"}},
}

// failState is where a failed action of target ends.
var failState = map[string]string{"manage": "enroll", "inspect": "inspect failed", "clean": "clean failed",
	"provide": "clean failed", "active": "deploy failed", "rebuild": "deploy failed", "deleted": "error", "adopt": "adopt failed"}

func (f *Fixture) provLocked(id string) *provisioning {
	if f.prov == nil {
		f.prov = map[string]*provisioning{}
	}
	p := f.prov[id]
	if p == nil {
		p = &provisioning{driver: "fake-hardware", extra: map[string]any{}, instanceInfo: map[string]any{}, properties: map[string]any{}}
		f.prov[id] = p
	}
	return p
}

// SetDriverEnabled makes Drivers list driver (fake-hardware is always
// listed).
func (f *Fixture) SetDriverEnabled(driver string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.drivers, driver) {
		f.drivers = append(f.drivers, driver)
	}
}

// SetPower sets node id's power state ("power on", "power off", or ""
// for one Ironic cannot tell), as a power action or a power sync would.
func (f *Fixture) SetPower(id, state string) bool {
	return f.UpdateNode(id, func(n *ironic.Node) { n.PowerState = state })
}

// SetMaintenance puts node id in maintenance (on) with reason and fault
// (Ironic's own: "power failure", "clean failure", ...; "" when an operator
// set it), or takes it out (!on: reason and fault cleared).
func (f *Fixture) SetMaintenance(id string, on bool, reason, fault string) bool {
	if !on {
		reason, fault = "", ""
	}
	return f.UpdateNode(id, func(n *ironic.Node) { n.Maintenance, n.MaintenanceReason, n.Fault = on, reason, fault })
}

// Hold keeps node id in the "* wait" state its transition reaches (on) or
// lets it go on (off), so a test can cancel there.
func (f *Fixture) Hold(id string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.provLocked(id).held = on
}

// Lock makes every write to node id answer 409 NodeLocked, as a conductor
// holding it beyond the client's retry budget does; "" unlocks.
func (f *Fixture) Lock(id, host string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.provLocked(id).locked = host
}

// FailNextAction makes node id's next provision action end in its failure
// state (clean failed, inspect failed, deploy failed, error; back to
// enroll for manage) with lastError.
func (f *Fixture) FailNextAction(id, lastError string) { f.FailNextActionOf(id, "", lastError) }

// FailNextActionOf is FailNextAction for the next action with target only
// ("" any target); other actions succeed meanwhile.
func (f *Fixture) FailNextActionOf(id, target, lastError string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.provLocked(id)
	p.failNext, p.failTarget = lastError, target
}

// PutFlavor adds or replaces a Nova flavor.
func (f *Fixture) PutFlavor(fl nova.Flavor) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flavors = slices.DeleteFunc(f.flavors, func(o nova.Flavor) bool { return o.ID == fl.ID })
	f.flavors = append(f.flavors, fl)
}

// PutImage adds a Glance image named name with id.
func (f *Fixture) PutImage(name, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.images == nil {
		f.images = map[string][]string{}
	}
	f.images[name] = append(f.images[name], id)
}

// Advance moves node id one state along its transition; false when it has
// none running.
func (f *Fixture) Advance(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.advanceLocked(id)
}

func (f *Fixture) advanceLocked(id string) bool {
	p := f.provLocked(id)
	n, ok := f.nodes[id]
	if !ok || len(p.path) == 0 || (p.held && isWaitState(n.ProvisionState)) {
		return false
	}
	f.firstStateLocked(id)
	return true
}

// firstStateLocked moves node id to the next state of its transition, held
// or not: an action's first state is set when Ironic accepts it.
func (f *Fixture) firstStateLocked(id string) {
	p := f.provLocked(id)
	next := p.path[0]
	p.path = p.path[1:]
	f.setStateLocked(id, next)
}

func isWaitState(s string) bool {
	return s == "clean wait" || s == "inspect wait" || s == "wait call-back" || s == "rescue wait"
}

// setStateLocked puts node id in state, with the side effects of reaching
// it.
func (f *Fixture) setStateLocked(id, state string) {
	n := f.nodes[id]
	p := f.provLocked(id)
	n.ProvisionState = state
	n.TargetProvisionState = ""
	if len(p.path) > 0 {
		n.TargetProvisionState = p.path[len(p.path)-1]
	}
	p.updated++
	n.ProvisionUpdatedAt = fixtureEpoch.Add(time.Duration(p.updated) * time.Second)
	switch state {
	case "manageable":
		if len(p.properties) == 0 {
			p.properties = map[string]any{"cpus": 8, "memory_mb": 16384, "local_gb": 100, "cpu_arch": "x86_64"}
		}
	case "active":
		for i, s := range f.servers {
			if strings.EqualFold(s.ID, n.InstanceUUID) && s.Status == "BUILD" {
				f.servers[i].Status = "ACTIVE"
			}
		}
	case "available":
		n.InstanceUUID = ""
		if n.PowerState == "" {
			n.PowerState = "power off"
		}
	case "deleting":
		p.instanceInfo = map[string]any{}
	}
	f.nodes[id] = n
}

// httpError is the gophercloud error Ironic or Nova would answer with.
func httpError(code int, method, url, faultstring string) error {
	inner, _ := json.Marshal(map[string]string{"faultstring": faultstring})
	body, _ := json.Marshal(map[string]string{"error_message": string(inner)})
	return gophercloud.ErrUnexpectedResponseCode{Method: method, URL: url, Expected: []int{200}, Actual: code, Body: body}
}

// writableLocked returns the 409 NodeLocked a locked node answers, or nil.
func (f *Fixture) writableLocked(id, method, url string) error {
	if host := f.provLocked(id).locked; host != "" {
		return httpError(http.StatusConflict, method, url,
			"Node "+id+" is locked by host "+host+", please retry after the current operation is completed.")
	}
	return nil
}

func (f *Fixture) detailLocked(id string) ironic.NodeDetail {
	n := f.nodes[id]
	p := f.provLocked(id)
	return ironic.NodeDetail{UUID: n.UUID, Name: n.Name, Driver: p.driver, ProvisionState: n.ProvisionState,
		TargetProvisionState: n.TargetProvisionState, ProvisionUpdatedAt: fixtureEpoch.Add(time.Duration(p.updated) * time.Second).Format(time.RFC3339),
		LastError: p.lastError, PowerState: n.PowerState, TargetPowerState: p.powerTarget, InstanceUUID: n.InstanceUUID, Reservation: p.locked,
		Maintenance: n.Maintenance, MaintenanceReason: n.MaintenanceReason, ResourceClass: n.ResourceClass,
		Extra: maps.Clone(p.extra), InstanceInfo: maps.Clone(p.instanceInfo), Properties: maps.Clone(p.properties)}
}

// lookupLocked finds a node by UUID or name.
func (f *Fixture) lookupLocked(ident string) (string, bool) {
	if _, ok := f.nodes[ident]; ok {
		return ident, true
	}
	for _, id := range f.order {
		if f.nodes[id].Name == ident && ident != "" {
			return id, true
		}
	}
	return "", false
}

// NodeDetail implements IronicProvisioning; each read moves the node one
// state along its transition first.
func (f *Fixture) NodeDetail(_ context.Context, ident string) (ironic.NodeDetail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodNodeDetail, ID: ident}); err != nil {
		return ironic.NodeDetail{}, err
	}
	id, ok := f.lookupLocked(ident)
	if !ok {
		return ironic.NodeDetail{}, f.endLocked(fmt.Errorf("ironic node %s: %w", ident, ironic.ErrNodeNotFound))
	}
	f.advanceLocked(id)
	f.settlePowerLocked(id)
	return f.detailLocked(id), nil
}

// CreateNode implements IronicProvisioning: the node starts in enroll with
// a UUID of the fixture's sequence; a name in use answers 409.
func (f *Fixture) CreateNode(_ context.Context, body map[string]any) (ironic.NodeDetail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name, _ := body["name"].(string)
	if err := f.beginLocked(Call{Method: MethodCreateNode, ID: name}); err != nil {
		return ironic.NodeDetail{}, err
	}
	if _, taken := f.lookupLocked(name); taken {
		return ironic.NodeDetail{}, f.endLocked(httpError(http.StatusConflict, "POST", "/v1/nodes", "A node with name "+name+" already exists."))
	}
	f.created++
	id := fmt.Sprintf("f1c70000-0000-4000-8000-%012d", f.created)
	rc, _ := body["resource_class"].(string)
	owner, _ := body["owner"].(string)
	lessee, _ := body["lessee"].(string)
	f.order = append(f.order, id)
	f.nodes[id] = ironic.Node{UUID: id, Name: name, ProvisionState: "enroll", ResourceClass: rc, Owner: owner, Lessee: lessee}
	p := f.provLocked(id)
	p.driver, _ = body["driver"].(string)
	p.extra = jsonCopy(body["extra"])
	p.properties = jsonCopy(body["properties"])
	f.changedLocked(id)
	return f.detailLocked(id), nil
}

// jsonCopy returns v as JSON would carry it (a map; empty for nil).
func jsonCopy(v any) map[string]any {
	out := map[string]any{}
	if b, err := json.Marshal(v); err == nil {
		_ = json.Unmarshal(b, &out)
	}
	if out == nil {
		out = map[string]any{}
	}
	return out
}

// ListPorts implements IronicProvisioning.
func (f *Fixture) ListPorts(_ context.Context, nodeUUID string) ([]ironic.Port, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodListPorts, ID: nodeUUID}); err != nil {
		return nil, err
	}
	return slices.Clone(f.provLocked(nodeUUID).ports), nil
}

// CreatePort implements IronicProvisioning; a MAC in use on any node
// answers 409.
func (f *Fixture) CreatePort(_ context.Context, nodeUUID, mac string, _ bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodCreatePort, ID: nodeUUID, Trait: mac}); err != nil {
		return err
	}
	for _, p := range f.prov {
		if slices.ContainsFunc(p.ports, func(o ironic.Port) bool { return strings.EqualFold(o.Address, mac) }) {
			return f.endLocked(httpError(http.StatusConflict, "POST", "/v1/ports", "A port with MAC address "+mac+" already exists."))
		}
	}
	p := f.provLocked(nodeUUID)
	p.ports = append(p.ports, ironic.Port{UUID: fmt.Sprintf("port-%s-%d", nodeUUID, len(p.ports)), Address: strings.ToLower(mac)})
	f.changedLocked(nodeUUID)
	return nil
}

// PortByAddress implements IronicProvisioning.
func (f *Fixture) PortByAddress(_ context.Context, mac string) (ironic.Port, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodPortByAddress, ID: mac}); err != nil {
		return ironic.Port{}, false, err
	}
	for id, p := range f.prov {
		if _, live := f.nodes[id]; !live {
			continue
		}
		for _, o := range p.ports {
			if strings.EqualFold(o.Address, mac) {
				o.NodeUUID = id
				return o, true, nil
			}
		}
	}
	return ironic.Port{}, false, nil
}

// deletable are the states Ironic deletes a node from (out of
// maintenance).
var deletable = []string{"enroll", "manageable", "available", "adopt failed", "inspect failed", "clean failed"}

// DeleteNode implements IronicProvisioning: the node and its ports go; a
// node in another state answers 409, a locked one 409 NodeLocked.
func (f *Fixture) DeleteNode(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodDeleteNode, ID: id}); err != nil {
		return err
	}
	n, ok := f.nodes[id]
	if !ok {
		return nil
	}
	url := "/v1/nodes/" + id
	if err := f.writableLocked(id, "DELETE", url); err != nil {
		return f.endLocked(err)
	}
	if !slices.Contains(deletable, n.ProvisionState) {
		return f.endLocked(httpError(http.StatusConflict, "DELETE", url, fmt.Sprintf("Can not delete node %s while it is in state %q.", id, n.ProvisionState)))
	}
	delete(f.nodes, id)
	delete(f.prov, id)
	f.order = slices.DeleteFunc(f.order, func(s string) bool { return s == id })
	f.changedLocked(id)
	return nil
}

// SetTraits implements IronicProvisioning.
func (f *Fixture) SetTraits(_ context.Context, id string, traits []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodSetTraits, ID: id}); err != nil {
		return err
	}
	n, ok := f.nodes[id]
	if !ok {
		return f.endLocked(fmt.Errorf("%w: %s", ironic.ErrNodeNotFound, id))
	}
	if err := f.writableLocked(id, "PUT", "/v1/nodes/"+id+"/traits"); err != nil {
		return f.endLocked(err)
	}
	if !slices.Equal(n.Traits, traits) {
		n.Traits = slices.Clone(traits)
		f.nodes[id] = n
		f.changedLocked(id)
	}
	return nil
}

// PatchNode implements IronicProvisioning for "add", "replace" and "remove" of
// /extra/<key> and /instance_info/<key>, and "remove" of /instance_uuid.
func (f *Fixture) PatchNode(_ context.Context, id string, ops []ironic.PatchOp) (ironic.NodeDetail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodPatchNode, ID: id}); err != nil {
		return ironic.NodeDetail{}, err
	}
	if _, ok := f.nodes[id]; !ok {
		return ironic.NodeDetail{}, f.endLocked(fmt.Errorf("%w: %s", ironic.ErrNodeNotFound, id))
	}
	if err := f.writableLocked(id, "PATCH", "/v1/nodes/"+id); err != nil {
		return ironic.NodeDetail{}, f.endLocked(err)
	}
	p := f.provLocked(id)
	for _, op := range ops {
		if op.Path == "/instance_uuid" && op.Op == "remove" {
			n := f.nodes[id]
			n.InstanceUUID = ""
			f.nodes[id] = n
			continue
		}
		var m map[string]any
		switch {
		case strings.HasPrefix(op.Path, "/extra/"):
			m = p.extra
		case strings.HasPrefix(op.Path, "/instance_info/"):
			m = p.instanceInfo
		default:
			return ironic.NodeDetail{}, f.endLocked(httpError(http.StatusBadRequest, "PATCH", "/v1/nodes/"+id, "fixture: cannot patch "+op.Path))
		}
		key := op.Path[strings.LastIndex(op.Path, "/")+1:]
		if op.Op == "remove" {
			if _, ok := m[key]; !ok {
				return ironic.NodeDetail{}, f.endLocked(httpError(http.StatusBadRequest, "PATCH", "/v1/nodes/"+id,
					"Adding a new attribute ("+op.Path+") to the root of the resource is not allowed."))
			}
			delete(m, key)
			continue
		}
		var v any
		b, _ := json.Marshal(op.Value)
		_ = json.Unmarshal(b, &v)
		m[key] = v
	}
	f.changedLocked(id)
	return f.detailLocked(id), nil
}

// SetProvisionState implements IronicProvisioning.
func (f *Fixture) SetProvisionState(_ context.Context, id, target string, extra map[string]any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodSetProvisionState, ID: id, Trait: target, Extra: extra}); err != nil {
		return err
	}
	n, ok := f.nodes[id]
	if !ok {
		return f.endLocked(fmt.Errorf("%w: %s", ironic.ErrNodeNotFound, id))
	}
	url := "/v1/nodes/" + id + "/states/provision"
	if err := f.writableLocked(id, "PUT", url); err != nil {
		return f.endLocked(err)
	}
	path, allowed := transitions[target][n.ProvisionState]
	if !allowed {
		return f.endLocked(httpError(http.StatusBadRequest, "PUT", url, fmt.Sprintf(
			"The requested action %q can not be performed on node %q while it is in state %q.", target, id, n.ProvisionState)))
	}
	p := f.provLocked(id)
	if img, _ := p.instanceInfo["image_source"].(string); (target == "active" || target == "rebuild") && img == "" {
		return f.endLocked(httpError(http.StatusBadRequest, "PUT", url, "Cannot validate image information for node "+id+": instance_info/image_source is missing."))
	}
	p.path = slices.Clone(path)
	p.lastError = ""
	if p.failNext != "" && failState[target] != "" && (p.failTarget == "" || p.failTarget == target) {
		p.path = append(p.path[:len(p.path)-1:len(p.path)-1], failState[target])
		p.lastError, p.failNext = p.failNext, ""
	}
	f.firstStateLocked(id)
	f.changedLocked(id)
	return nil
}

// Drivers implements IronicProvisioning.
func (f *Fixture) Drivers(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodDrivers}); err != nil {
		return nil, err
	}
	out := append([]string{"fake-hardware"}, f.drivers...)
	slices.Sort(out)
	return slices.Compact(out), nil
}

package ironic

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/ironlink/ironlink/satellite/openstack"
)

// The calls of this file are the operations credential's (satellite/
// operations: enrol, inspect, clean, provide, deploy, undeploy). Each runs
// under Client.WriteRetry with provisionRetryable — the operations
// credential's client sets WriteRetry to its own policy — and returns
// OpenStack's error unwrapped (callers read its status with
// openstack.StatusCode) except where a 404 is documented.

// NodeDetail is the whole of an Ironic node as an operation reads it (Ironic
// API reference "Show Node Details", GET /v1/nodes/{node_ident} without
// ?fields). driver_info is deliberately not decoded: it holds BMC
// credentials.
type NodeDetail struct {
	// UUID, Name and Driver (the hardware type) identify the node.
	UUID   string `json:"uuid"`
	Name   string `json:"name"`
	Driver string `json:"driver"`
	// ProvisionState is where the node is in the state machine
	// (docs/design/openstack.md §1.2), TargetProvisionState where it is heading ("" at
	// rest), ProvisionUpdatedAt Ironic's timestamp of the last change, as
	// sent (compared as text: the operation marker keeps it).
	ProvisionState       string `json:"provision_state"`
	TargetProvisionState string `json:"target_provision_state"`
	ProvisionUpdatedAt   string `json:"provision_updated_at"`
	// LastError is the error of the last failed action ("" or null: none
	// told).
	LastError string `json:"last_error"`
	// PowerState is "power on", "power off" or "" (unknown);
	// TargetPowerState is the power state a change in progress heads for
	// ("" at rest).
	PowerState       string `json:"power_state"`
	TargetPowerState string `json:"target_power_state"`
	// InstanceUUID is the Nova instance (or other consumer) on the node.
	InstanceUUID string `json:"instance_uuid"`
	// Reservation is the conductor holding the node's lock ("" when free).
	Reservation string `json:"reservation"`
	// Maintenance is Ironic's maintenance flag, MaintenanceReason its
	// free-text reason.
	Maintenance       bool   `json:"maintenance"`
	MaintenanceReason string `json:"maintenance_reason"`
	// ResourceClass is what the node is sold as in Placement.
	ResourceClass string `json:"resource_class"`
	// Extra, InstanceInfo and Properties are the node's free-form maps:
	// extra holds the operations' marker, instance_info what a deploy
	// writes, properties what inspection found.
	Extra        map[string]any `json:"extra"`
	InstanceInfo map[string]any `json:"instance_info"`
	Properties   map[string]any `json:"properties"`
}

// Port is an Ironic port as ListPorts returns it (Ironic API reference
// "Ports"): its UUID and MAC address.
type Port struct {
	// UUID is the port's UUID.
	UUID string `json:"uuid"`
	// Address is the MAC address, lower case.
	Address string `json:"address"`
	// NodeUUID is the node the port belongs to (set by PortByAddress;
	// ListPorts lists one node's ports and leaves it empty).
	NodeUUID string `json:"node_uuid,omitempty"`
}

// PatchOp is one JSON-patch operation of PatchNode (RFC 6902; Ironic API
// reference "Update Node").
type PatchOp struct {
	// Op is "add", "replace" or "remove".
	Op string `json:"op"`
	// Path is the field, e.g. "/extra/ironlink_operation".
	Path string `json:"path"`
	// Value is the new value (JSON-encoded; none for "remove").
	Value any `json:"value,omitempty"`
}

// provisionRetryable is the retry predicate of every operations call: 409
// NodeLocked (Ironic answers 409 for a node a conductor holds; docs/design/openstack.md
// §9 "locks") and 502/503/504 or a transport failure. A 409 for anything
// but a lock (a name or MAC that exists) is not retried.
func provisionRetryable(err error) bool {
	if openstack.StatusCode(err) == http.StatusConflict {
		return IsNodeLocked(err)
	}
	return openstack.IsTransient(err)
}

// IsNodeLocked reports whether err is Ironic's 409 NodeLocked ("Node X is
// locked by host Y, please retry after the current operation is
// completed.").
func IsNodeLocked(err error) bool {
	b := string(openstack.ResponseBody(err))
	return strings.Contains(b, "is locked by host") || strings.Contains(b, "NodeLocked")
}

// Message extracts Ironic's faultstring from an error body
// ({"error_message": "{\"faultstring\": ...}"}), falling back to err's text.
func Message(err error) string {
	body := openstack.ResponseBody(err)
	var env struct {
		ErrorMessage string `json:"error_message"`
	}
	if json.Unmarshal(body, &env) == nil && env.ErrorMessage != "" {
		var inner struct {
			Faultstring string `json:"faultstring"`
		}
		if json.Unmarshal([]byte(env.ErrorMessage), &inner) == nil && inner.Faultstring != "" {
			return inner.Faultstring
		}
		return env.ErrorMessage
	}
	return err.Error()
}

// provisionCall runs fn under WriteRetry and provisionRetryable.
func provisionCall[T any](ctx context.Context, c *Client, op string, fn func(ctx context.Context) (T, error)) (T, error) {
	v, _, err := openstack.Retry(ctx, c.WriteRetry, c.log, op, provisionRetryable, fn)
	return v, err
}

// NodeDetail reads a node by UUID or name (Ironic API reference "Show Node
// Details": GET /v1/nodes/{node_ident}, 200). A 404 wraps ErrNodeNotFound.
func (c *Client) NodeDetail(ctx context.Context, ident string) (NodeDetail, error) {
	return provisionCall(ctx, c, "ironic: get node", func(ctx context.Context) (NodeDetail, error) {
		var n NodeDetail
		_, err := c.sc.Get(ctx, c.sc.ServiceURL("nodes", url.PathEscape(ident)), &n, &gophercloud.RequestOpts{OkCodes: []int{200}})
		if openstack.StatusCode(err) == http.StatusNotFound {
			return NodeDetail{}, fmt.Errorf("ironic node %s: %w", ident, ErrNodeNotFound)
		}
		return n, err
	})
}

// CreateNode creates a node (Ironic API reference "Create Node": POST
// /v1/nodes, 201) from body, the request's JSON object (name, driver,
// driver_info, resource_class, properties, owner, lessee, extra), sent as
// given. A 409 (the name exists) is returned as is.
func (c *Client) CreateNode(ctx context.Context, body map[string]any) (NodeDetail, error) {
	return provisionCall(ctx, c, "ironic: create node", func(ctx context.Context) (NodeDetail, error) {
		var n NodeDetail
		_, err := c.sc.Post(ctx, c.sc.ServiceURL("nodes"), body, &n, &gophercloud.RequestOpts{OkCodes: []int{201}})
		return n, err
	})
}

// ListPorts lists the node's ports (Ironic API reference "List Ports": GET
// /v1/ports?node_uuid=…&fields=uuid,address&limit=1000).
func (c *Client) ListPorts(ctx context.Context, nodeUUID string) ([]Port, error) {
	return provisionCall(ctx, c, "ironic: list ports", func(ctx context.Context) ([]Port, error) {
		var out struct {
			Ports []Port `json:"ports"`
		}
		u := c.sc.ServiceURL("ports") + "?node_uuid=" + url.QueryEscape(nodeUUID) + "&fields=uuid,address&limit=1000"
		_, err := c.sc.Get(ctx, u, &out, &gophercloud.RequestOpts{OkCodes: []int{200}})
		return out.Ports, err
	})
}

// PortByAddress returns the port with MAC mac and the node it belongs to
// (Ironic API reference "List Ports": GET
// /v1/ports?address=…&fields=uuid,address,node_uuid); found false when no
// port has that MAC.
func (c *Client) PortByAddress(ctx context.Context, mac string) (Port, bool, error) {
	return provisionCall2(ctx, c, "ironic: port by address", func(ctx context.Context) (Port, bool, error) {
		var out struct {
			Ports []Port `json:"ports"`
		}
		u := c.sc.ServiceURL("ports") + "?address=" + url.QueryEscape(mac) + "&fields=uuid,address,node_uuid"
		if _, err := c.sc.Get(ctx, u, &out, &gophercloud.RequestOpts{OkCodes: []int{200}}); err != nil {
			return Port{}, false, err
		}
		if len(out.Ports) == 0 {
			return Port{}, false, nil
		}
		return out.Ports[0], true, nil
	})
}

// provisionCall2 is provisionCall for a call with two results.
func provisionCall2[T any](ctx context.Context, c *Client, op string, fn func(ctx context.Context) (T, bool, error)) (T, bool, error) {
	type pair struct {
		v  T
		ok bool
	}
	p, err := provisionCall(ctx, c, op, func(ctx context.Context) (pair, error) {
		v, ok, err := fn(ctx)
		return pair{v, ok}, err
	})
	return p.v, p.ok, err
}

// DeleteNode deletes the node (Ironic API reference "Delete Node": DELETE
// /v1/nodes/{id}, 204). Idempotent: a node Ironic does not have (404) is
// a success. Ironic refuses (400/409) a node in a state it cannot delete
// from (active, deploying, cleaning, …); the error is returned as is.
func (c *Client) DeleteNode(ctx context.Context, id string) error {
	_, err := provisionCall(ctx, c, "ironic: delete node", func(ctx context.Context) (struct{}, error) {
		_, err := c.sc.Delete(ctx, c.sc.ServiceURL("nodes", id), &gophercloud.RequestOpts{OkCodes: []int{204}})
		if openstack.StatusCode(err) == http.StatusNotFound {
			return struct{}{}, nil
		}
		return struct{}{}, err
	})
	return err
}

// CreatePort creates a port with MAC mac on the node (Ironic API reference
// "Create Port": POST /v1/ports, 201). A 409 (the MAC exists) and a 400 are
// returned as is.
func (c *Client) CreatePort(ctx context.Context, nodeUUID, mac string, pxe bool) error {
	_, err := provisionCall(ctx, c, "ironic: create port", func(ctx context.Context) (struct{}, error) {
		body := map[string]any{"node_uuid": nodeUUID, "address": mac, "pxe_enabled": pxe}
		_, err := c.sc.Post(ctx, c.sc.ServiceURL("ports"), body, nil, &gophercloud.RequestOpts{OkCodes: []int{201}})
		return struct{}{}, err
	})
	return err
}

// SetTraits replaces the node's traits with traits (Ironic API reference
// "Node Traits", "Set all traits of a node": PUT /v1/nodes/{id}/traits,
// 204). Idempotent.
func (c *Client) SetTraits(ctx context.Context, id string, traits []string) error {
	_, err := provisionCall(ctx, c, "ironic: set traits", func(ctx context.Context) (struct{}, error) {
		_, err := c.sc.Put(ctx, c.sc.ServiceURL("nodes", id, "traits"), map[string]any{"traits": traits}, nil, &gophercloud.RequestOpts{OkCodes: []int{204}})
		return struct{}{}, err
	})
	return err
}

// PatchNode applies a JSON patch to the node (Ironic API reference "Update
// Node": PATCH /v1/nodes/{id}, 200) and returns the node after it.
func (c *Client) PatchNode(ctx context.Context, id string, ops []PatchOp) (NodeDetail, error) {
	return provisionCall(ctx, c, "ironic: patch node", func(ctx context.Context) (NodeDetail, error) {
		var n NodeDetail
		_, err := c.sc.Patch(ctx, c.sc.ServiceURL("nodes", id), ops, &n, &gophercloud.RequestOpts{OkCodes: []int{200}})
		return n, err
	})
}

// SetProvisionState asks for a provision-state change (Ironic API reference
// "Change Node Provision State": PUT /v1/nodes/{id}/states/provision, 202)
// with {"target": target} plus extra's keys (clean_steps, configdrive).
// Ironic answers 400 for a target the node's state does not allow.
func (c *Client) SetProvisionState(ctx context.Context, id, target string, extra map[string]any) error {
	body := map[string]any{"target": target}
	for k, v := range extra {
		body[k] = v
	}
	_, err := provisionCall(ctx, c, "ironic: provision "+target, func(ctx context.Context) (struct{}, error) {
		_, err := c.sc.Put(ctx, c.sc.ServiceURL("nodes", id, "states", "provision"), body, nil, &gophercloud.RequestOpts{OkCodes: []int{202}})
		return struct{}{}, err
	})
	return err
}

// Drivers lists the hardware types the site's conductors enable, sorted
// (Ironic API reference "List Drivers": GET /v1/drivers).
func (c *Client) Drivers(ctx context.Context) ([]string, error) {
	return provisionCall(ctx, c, "ironic: list drivers", func(ctx context.Context) ([]string, error) {
		var out struct {
			Drivers []struct {
				Name string `json:"name"`
			} `json:"drivers"`
		}
		_, err := c.sc.Get(ctx, c.sc.ServiceURL("drivers"), &out, &gophercloud.RequestOpts{OkCodes: []int{200}})
		var names []string
		for _, d := range out.Drivers {
			names = append(names, d.Name)
		}
		slices.Sort(names)
		return names, err
	})
}

// ProvisionAPICalls lists every request of this file, as access rules for
// the operations credential (deploy/openstack/operations-access-rules.yaml;
// docs/design/openstack.md §9).
func ProvisionAPICalls() []openstack.APICall {
	return openstack.Calls("baremetal", `
		GET /v1/drivers
		POST /v1/nodes
		GET /v1/nodes/*
		PATCH /v1/nodes/*
		DELETE /v1/nodes/*
		PUT /v1/nodes/*/states/provision
		PUT /v1/nodes/*/states/power
		PUT /v1/nodes/*/maintenance
		DELETE /v1/nodes/*/maintenance
		GET /v1/nodes/*/traits
		PUT /v1/nodes/*/traits
		GET /v1/ports
		POST /v1/ports
`)
}

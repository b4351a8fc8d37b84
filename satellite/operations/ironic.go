package operations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/ironlink/ironlink/satellite/openstack"
)

// markerKey is the key under the node's extra where the runner records the
// provision action it asked for (see the package documentation).
const markerKey = "ironlink_operation"

// node is what a pass reads of an Ironic node (Ironic API reference "Show
// Node Details"). driver_info is deliberately not decoded: it holds BMC
// credentials.
type node struct {
	UUID                 string         `json:"uuid"`
	Name                 string         `json:"name"`
	Driver               string         `json:"driver"`
	ProvisionState       string         `json:"provision_state"`
	TargetProvisionState string         `json:"target_provision_state"`
	ProvisionUpdatedAt   string         `json:"provision_updated_at"`
	LastError            string         `json:"last_error"`
	PowerState           string         `json:"power_state"`
	InstanceUUID         string         `json:"instance_uuid"`
	Reservation          string         `json:"reservation"`
	Maintenance          bool           `json:"maintenance"`
	ResourceClass        string         `json:"resource_class"`
	Extra                map[string]any `json:"extra"`
	InstanceInfo         map[string]any `json:"instance_info"`
	Properties           map[string]any `json:"properties"`
}

// marker is the value stored at extra/ironlink_operation.
type marker struct {
	OperationID string `json:"operation_id"`
	Action      string `json:"action"`
	Since       string `json:"since"`
}

// markerOf returns the node's marker, or the zero marker.
func (n *node) markerOf() marker {
	raw, ok := n.Extra[markerKey]
	if !ok {
		return marker{}
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return marker{}
	}
	var m marker
	_ = json.Unmarshal(b, &m)
	return m
}

// actionTaken reports whether the node carries opID's marker for action and
// its provision state changed since the marker was written: the action was
// accepted by Ironic.
func (n *node) actionTaken(opID, action string) bool {
	m := n.markerOf()
	return m.OperationID == opID && m.Action == action && m.Since != n.ProvisionUpdatedAt
}

// errNotFound marks a 404 for the thing asked for.
var errNotFound = errors.New("not found")

// retryable is the retry predicate of every write: 409 NodeLocked (Ironic
// answers 409 for a node a conductor holds; OPENSTACK.md §9 "locks") and
// 502/503/504 or a transport failure. A 409 for anything but a lock (a name
// or MAC that exists) is not retried.
func retryable(err error) bool {
	if openstack.StatusCode(err) == http.StatusConflict {
		return isNodeLocked(err)
	}
	return openstack.IsTransient(err)
}

// isNodeLocked reports whether a 409 is Ironic's NodeLocked ("Node X is
// locked by host Y, please retry after the current operation is
// completed.").
func isNodeLocked(err error) bool {
	b := string(openstack.ResponseBody(err))
	return strings.Contains(b, "is locked by host") || strings.Contains(b, "NodeLocked")
}

// ironicMessage extracts Ironic's faultstring from an error body
// ({"error_message": "{\"faultstring\": ...}"}), falling back to err.
func ironicMessage(err error) string {
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

// call runs fn with the runner's write policy and retry predicate.
func call[T any](ctx context.Context, r *Runner, op string, fn func(ctx context.Context) (T, error)) (T, error) {
	v, _, err := openstack.Retry(ctx, r.retry, r.log, op, retryable, fn)
	return v, err
}

// getNode reads a node by UUID or name; errNotFound for a 404.
func (r *Runner) getNode(ctx context.Context, ident string) (*node, error) {
	return call(ctx, r, "ironic: get node", func(ctx context.Context) (*node, error) {
		var n node
		_, err := r.bm.Get(ctx, r.bm.ServiceURL("nodes", url.PathEscape(ident)), &n, &gophercloud.RequestOpts{OkCodes: []int{200}})
		if openstack.StatusCode(err) == http.StatusNotFound {
			return nil, fmt.Errorf("ironic node %s: %w", ident, errNotFound)
		}
		if err != nil {
			return nil, err
		}
		return &n, nil
	})
}

// createNode POSTs /v1/nodes; 409 (name exists) is returned as is.
func (r *Runner) createNode(ctx context.Context, body map[string]any) (*node, error) {
	return call(ctx, r, "ironic: create node", func(ctx context.Context) (*node, error) {
		var n node
		_, err := r.bm.Post(ctx, r.bm.ServiceURL("nodes"), body, &n, &gophercloud.RequestOpts{OkCodes: []int{201}})
		if err != nil {
			return nil, err
		}
		return &n, nil
	})
}

type port struct {
	UUID    string `json:"uuid"`
	Address string `json:"address"`
}

// listPorts lists the node's ports (GET /v1/ports?node_uuid=).
func (r *Runner) listPorts(ctx context.Context, nodeUUID string) ([]port, error) {
	return call(ctx, r, "ironic: list ports", func(ctx context.Context) ([]port, error) {
		var out struct {
			Ports []port `json:"ports"`
		}
		u := r.bm.ServiceURL("ports") + "?node_uuid=" + url.QueryEscape(nodeUUID) + "&fields=uuid,address&limit=1000"
		_, err := r.bm.Get(ctx, u, &out, &gophercloud.RequestOpts{OkCodes: []int{200}})
		return out.Ports, err
	})
}

// createPort POSTs /v1/ports.
func (r *Runner) createPort(ctx context.Context, nodeUUID, mac string, pxe bool) error {
	_, err := call(ctx, r, "ironic: create port", func(ctx context.Context) (struct{}, error) {
		body := map[string]any{"node_uuid": nodeUUID, "address": mac, "pxe_enabled": pxe}
		_, err := r.bm.Post(ctx, r.bm.ServiceURL("ports"), body, nil, &gophercloud.RequestOpts{OkCodes: []int{201}})
		return struct{}{}, err
	})
	return err
}

// getTraits reads the node's traits.
func (r *Runner) getTraits(ctx context.Context, id string) ([]string, error) {
	return call(ctx, r, "ironic: get traits", func(ctx context.Context) ([]string, error) {
		var out struct {
			Traits []string `json:"traits"`
		}
		_, err := r.bm.Get(ctx, r.bm.ServiceURL("nodes", id, "traits"), &out, &gophercloud.RequestOpts{OkCodes: []int{200}})
		return out.Traits, err
	})
}

// setTraits replaces the node's traits (PUT /v1/nodes/{id}/traits).
func (r *Runner) setTraits(ctx context.Context, id string, traits []string) error {
	_, err := call(ctx, r, "ironic: set traits", func(ctx context.Context) (struct{}, error) {
		_, err := r.bm.Put(ctx, r.bm.ServiceURL("nodes", id, "traits"), map[string]any{"traits": traits}, nil, &gophercloud.RequestOpts{OkCodes: []int{204}})
		return struct{}{}, err
	})
	return err
}

type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// patchNode applies a JSON patch to the node.
func (r *Runner) patchNode(ctx context.Context, id string, ops []patchOp) (*node, error) {
	return call(ctx, r, "ironic: patch node", func(ctx context.Context) (*node, error) {
		var n node
		_, err := r.bm.Patch(ctx, r.bm.ServiceURL("nodes", id), ops, &n, &gophercloud.RequestOpts{OkCodes: []int{200}})
		if err != nil {
			return nil, err
		}
		return &n, nil
	})
}

// mark records that opID is about to ask for action on n.
func (r *Runner) mark(ctx context.Context, n *node, opID, action string) error {
	_, err := r.patchNode(ctx, n.UUID, []patchOp{{Op: "add", Path: "/extra/" + markerKey,
		Value: marker{OperationID: opID, Action: action, Since: n.ProvisionUpdatedAt}}})
	return err
}

// provision asks for a provision-state change (PUT
// /v1/nodes/{id}/states/provision; 202).
func (r *Runner) provision(ctx context.Context, id, target string, extra map[string]any) error {
	body := map[string]any{"target": target}
	for k, v := range extra {
		body[k] = v
	}
	_, err := call(ctx, r, "ironic: provision "+target, func(ctx context.Context) (struct{}, error) {
		_, err := r.bm.Put(ctx, r.bm.ServiceURL("nodes", id, "states", "provision"), body, nil, &gophercloud.RequestOpts{OkCodes: []int{202}})
		return struct{}{}, err
	})
	return err
}

// drivers lists the hardware types the site's conductors enable (GET
// /v1/drivers).
func (r *Runner) drivers(ctx context.Context) ([]string, error) {
	return call(ctx, r, "ironic: list drivers", func(ctx context.Context) ([]string, error) {
		var out struct {
			Drivers []struct {
				Name string `json:"name"`
			} `json:"drivers"`
		}
		_, err := r.bm.Get(ctx, r.bm.ServiceURL("drivers"), &out, &gophercloud.RequestOpts{OkCodes: []int{200}})
		var names []string
		for _, d := range out.Drivers {
			names = append(names, d.Name)
		}
		slices.Sort(names)
		return names, err
	})
}

// APICalls lists every request this package makes, as access rules
// (deploy/openstack/operations-access-rules.yaml is rendered from them by
// satellite/accessrules; OPENSTACK.md §9).
func APICalls() []openstack.APICall {
	return []openstack.APICall{
		{Service: "baremetal", Method: http.MethodGet, Path: "/v1/drivers"},
		{Service: "baremetal", Method: http.MethodPost, Path: "/v1/nodes"},
		{Service: "baremetal", Method: http.MethodGet, Path: "/v1/nodes/*"},
		{Service: "baremetal", Method: http.MethodPatch, Path: "/v1/nodes/*"},
		{Service: "baremetal", Method: http.MethodPut, Path: "/v1/nodes/*/states/provision"},
		{Service: "baremetal", Method: http.MethodGet, Path: "/v1/nodes/*/traits"},
		{Service: "baremetal", Method: http.MethodPut, Path: "/v1/nodes/*/traits"},
		{Service: "baremetal", Method: http.MethodGet, Path: "/v1/ports"},
		{Service: "baremetal", Method: http.MethodPost, Path: "/v1/ports"},
		{Service: "compute", Method: http.MethodGet, Path: "/v2.1/flavors/*"},
		{Service: "compute", Method: http.MethodGet, Path: "/v2.1/flavors/detail"},
		{Service: "compute", Method: http.MethodGet, Path: "/v2.1/servers/detail"},
		{Service: "compute", Method: http.MethodPost, Path: "/v2.1/servers"},
		{Service: "compute", Method: http.MethodGet, Path: "/v2.1/servers/*"},
		{Service: "compute", Method: http.MethodDelete, Path: "/v2.1/servers/*"},
		{Service: "image", Method: http.MethodGet, Path: "/v2/images"},
	}
}

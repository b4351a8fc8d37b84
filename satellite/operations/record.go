package operations

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/openstack"
)

// Every write an operation sends to Ironic or Nova goes through one of the
// methods of this file, which records it on the step it belongs to
// (ironlinkv1.StepRequest: method, path, detail, status, error, tries,
// attempt), so the operation's record says which request was sent under
// which delivery attempt and what OpenStack answered — also after a
// satellite restart, since the hub keeps the steps of earlier attempts
// (docs/reference/operations.md "Steps and attempts").

// maxStepRequests bounds the requests kept per step (the newest kept).
const maxStepRequests = 20

// maxRequestError bounds a recorded error text in bytes.
const maxRequestError = 1024

// record appends a request to the open (else the last) step and sends
// progress. ok is the status OpenStack answers on success.
func (u *run) record(method, path, detail string, ok int, err error) {
	r := &ironlinkv1.StepRequest{Method: method, Path: path, Detail: detail, Status: int32(ok), Tries: 1, Time: timestamppb.Now()}
	if err != nil {
		r.Status = int32(openstack.StatusCode(err))
		r.Error = truncate(requestError(err), maxRequestError)
	}
	var re *openstack.RetryError
	if errors.As(err, &re) {
		r.Tries = int32(re.Attempts)
	}
	u.mu.Lock()
	r.Attempt = u.attempt
	if len(u.steps) == 0 {
		u.steps = append(u.steps, &ironlinkv1.OperationStep{Name: "request", StartTime: r.Time, Attempt: u.attempt})
	}
	s := u.steps[len(u.steps)-1]
	s.Requests = append(s.Requests, r)
	if len(s.Requests) > maxStepRequests {
		s.Requests = s.Requests[len(s.Requests)-maxStepRequests:]
	}
	u.mu.Unlock()
	u.log.Info("operation request", "method", method, "path", path, "detail", detail, "status", r.Status, "tries", r.Tries, "error", r.Error)
	u.sendProgress(false)
}

// requestError is OpenStack's own message of err (Ironic's faultstring,
// Nova's badRequest/conflict message), else err's text.
func requestError(err error) string {
	if openstack.StatusCode(err) != 0 {
		return ironic.Message(err)
	}
	return err.Error()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func nodePath(id string, sub ...string) string {
	return "baremetal /v1/nodes/" + strings.Join(append([]string{id}, sub...), "/")
}

// setProvision asks Ironic for target on the node (PUT …/states/provision).
func (u *run) setProvision(ctx context.Context, id, target string, extra map[string]any) error {
	err := u.r.ironic.SetProvisionState(ctx, id, target, extra)
	u.record(http.MethodPut, nodePath(id, "states", "provision"), "target="+target, http.StatusAccepted, err)
	return err
}

// patchNode applies ops to the node (PATCH /v1/nodes/{id}).
func (u *run) patchNode(ctx context.Context, id string, ops []patchOp) (*node, error) {
	n, err := u.r.ironic.PatchNode(ctx, id, ops)
	var parts []string
	for _, o := range ops {
		parts = append(parts, o.Op+" "+o.Path)
	}
	u.record(http.MethodPatch, nodePath(id), strings.Join(parts, ", "), http.StatusOK, err)
	if err != nil {
		return nil, err
	}
	return &n, nil
}

// mark records that this operation is about to ask for action on n (a
// marker in extra; see the package documentation). A marker of this
// operation keeps saying whether the operation created the node.
func (u *run) mark(ctx context.Context, n *node, action string) error {
	id := u.req.GetOperationId()
	old := markerOf(n)
	_, err := u.patchNode(ctx, n.UUID, []patchOp{{Op: "add", Path: "/extra/" + markerKey,
		Value: marker{OperationID: id, Action: action, Since: n.ProvisionUpdatedAt, Created: old.OperationID == id && old.Created}}})
	return err
}

// createNode creates a node (POST /v1/nodes); 409 (name exists) is
// returned as is.
func (u *run) createNode(ctx context.Context, body map[string]any) (*node, error) {
	n, err := u.r.ironic.CreateNode(ctx, body)
	name, _ := body["name"].(string)
	u.record(http.MethodPost, "baremetal /v1/nodes", "name="+name, http.StatusCreated, err)
	if err != nil {
		return nil, err
	}
	return &n, nil
}

// deleteNode deletes a node this operation created (DELETE /v1/nodes/{id}).
func (u *run) deleteNode(ctx context.Context, id string) error {
	err := u.r.ironic.DeleteNode(ctx, id)
	u.record(http.MethodDelete, nodePath(id), "", http.StatusNoContent, err)
	return err
}

// createPort creates a port (POST /v1/ports).
func (u *run) createPort(ctx context.Context, nodeID, mac string, pxe bool) error {
	err := u.r.ironic.CreatePort(ctx, nodeID, mac, pxe)
	u.record(http.MethodPost, "baremetal /v1/ports", "address="+mac+" node_uuid="+nodeID, http.StatusCreated, err)
	return err
}

// setTraits replaces the node's traits (PUT /v1/nodes/{id}/traits).
func (u *run) setTraits(ctx context.Context, id string, traits []string) error {
	err := u.r.ironic.SetTraits(ctx, id, traits)
	u.record(http.MethodPut, nodePath(id, "traits"), strings.Join(traits, ","), http.StatusNoContent, err)
	return err
}

// createServer boots a server (POST /v2.1/servers).
func (u *run) createServer(ctx context.Context, o nova.CreateServerOpts) (string, error) {
	sid, err := u.r.nova.CreateServer(ctx, o)
	detail := "name=" + o.Name + " hypervisor_hostname=" + o.NodeUUID
	if sid != "" {
		detail += " → server " + sid
	}
	u.record(http.MethodPost, "compute /v2.1/servers", detail, http.StatusAccepted, err)
	return sid, err
}

// deleteServer deletes a server (DELETE /v2.1/servers/{id}).
func (u *run) deleteServer(ctx context.Context, id string) error {
	err := u.r.nova.DeleteServer(ctx, id)
	u.record(http.MethodDelete, "compute /v2.1/servers/"+id, "", http.StatusNoContent, err)
	return err
}

// changePower asks Ironic for a power target (PUT …/states/power), with
// the operation's power_timeout_seconds.
func (u *run) changePower(ctx context.Context, id, target string) error {
	t := int(u.req.GetParams().GetPowerTimeoutSeconds())
	err := u.r.ironic.ChangePowerState(ctx, id, target, t)
	detail := "target=" + target
	if t > 0 {
		detail += " timeout=" + itoa(t) + "s"
	}
	u.record(http.MethodPut, nodePath(id, "states", "power"), detail, http.StatusAccepted, err)
	return err
}

// maintenance sets (with reason) or clears the node's maintenance flag
// (PUT or DELETE …/maintenance).
func (u *run) maintenance(ctx context.Context, id string, on bool, reason string) error {
	if on {
		err := u.r.ironic.SetMaintenanceFlag(ctx, id, reason)
		u.record(http.MethodPut, nodePath(id, "maintenance"), "reason="+truncate(reason, 120), http.StatusAccepted, err)
		return err
	}
	err := u.r.ironic.ClearMaintenanceFlag(ctx, id)
	u.record(http.MethodDelete, nodePath(id, "maintenance"), "", http.StatusAccepted, err)
	return err
}

func itoa(i int) string { return strconv.Itoa(i) }

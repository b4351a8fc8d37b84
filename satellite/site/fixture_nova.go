package site

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/ironlink/ironlink/satellite/nova"
)

// ServersNamed implements NovaOperations.
func (f *Fixture) ServersNamed(_ context.Context, name string) ([]nova.Server, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodServersNamed, ID: name}); err != nil {
		return nil, err
	}
	var out []nova.Server
	for _, s := range f.servers {
		if s.Name == name && !s.Deleted() {
			out = append(out, s)
		}
	}
	return out, nil
}

// Flavor implements NovaOperations.
func (f *Fixture) Flavor(_ context.Context, id string) (nova.Flavor, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodFlavor, ID: id}); err != nil {
		return nova.Flavor{}, err
	}
	for _, fl := range f.flavors {
		if fl.ID == id {
			return fl, nil
		}
	}
	return nova.Flavor{}, f.endLocked(fmt.Errorf("%w: %s", nova.ErrFlavorNotFound, id))
}

// Flavors implements NovaOperations.
func (f *Fixture) Flavors(context.Context) ([]nova.Flavor, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodFlavors}); err != nil {
		return nil, err
	}
	return slices.Clone(f.flavors), nil
}

// CreateServer implements NovaOperations as Nova's Ironic driver does on
// an available node: the server is BUILD on the node, which gets the
// server as instance_uuid and deploys (deploying, wait call-back, active:
// one state per NodeDetail read); the server turns ACTIVE with the node.
// A node that is not available, or in maintenance, gets a server in ERROR
// with "No valid host" that never reached it.
func (f *Fixture) CreateServer(_ context.Context, o nova.CreateServerOpts) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodCreateServer, ID: o.NodeUUID, Trait: o.Name}); err != nil {
		return "", err
	}
	n, ok := f.nodes[o.NodeUUID]
	if !ok {
		return "", f.endLocked(httpError(http.StatusBadRequest, "POST", "/v2.1/servers", "Compute host "+o.NodeUUID+" could not be found."))
	}
	f.created++
	id := fmt.Sprintf("5e700000-0000-4000-8000-%012d", f.created)
	s := nova.Server{ID: id, Name: o.Name, Status: "BUILD", TaskState: "spawning", HypervisorHostname: o.NodeUUID, HypervisorVisible: true}
	if n.ProvisionState != "available" || n.Maintenance || n.InstanceUUID != "" {
		s.Status, s.TaskState, s.HypervisorHostname = "ERROR", "", ""
		s.FaultMessage = "No valid host was found. There are not enough hosts available."
		f.servers = append(f.servers, s)
		f.changedLocked(id)
		return id, nil
	}
	if fb := f.provLocked(o.NodeUUID).failBoot; fb[0] != "" {
		// nova-compute refused the node (as with a stale instance_uuid):
		// the build was rescheduled until Nova gave up.
		s.Status, s.TaskState, s.HypervisorHostname, s.FaultMessage = "ERROR", "", "", fb[0]
		p := f.provLocked(o.NodeUUID)
		p.lastError, p.failBoot = fb[1], [2]string{}
		f.servers = append(f.servers, s)
		f.changedLocked(id)
		return id, nil
	}
	f.servers = append(f.servers, s)
	n.InstanceUUID = id
	f.nodes[o.NodeUUID] = n
	p := f.provLocked(o.NodeUUID)
	p.instanceInfo = map[string]any{"image_source": o.ImageID}
	p.path = []string{"deploying", "wait call-back", "active"}
	f.firstStateLocked(o.NodeUUID)
	f.changedLocked(o.NodeUUID)
	return id, nil
}

// DeleteServer implements NovaOperations: the server is gone at once, and
// the node it ran on undeploys (deleting, cleaning, available).
func (f *Fixture) DeleteServer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodDeleteServer, ID: id}); err != nil {
		return err
	}
	i := slices.IndexFunc(f.servers, func(s nova.Server) bool { return strings.EqualFold(s.ID, id) && !s.Deleted() })
	if i < 0 {
		return nil
	}
	host := f.servers[i].HypervisorHostname
	f.servers = slices.Delete(f.servers, i, i+1)
	f.changedLocked(id)
	if n, ok := f.nodes[host]; ok && strings.EqualFold(n.InstanceUUID, id) {
		f.provLocked(host).path = []string{"deleting", "cleaning", "available"}
		f.firstStateLocked(host)
	}
	return nil
}

// FailNextBoot makes the next server booted on node id end in ERROR with
// Nova's fault and the node's last_error lastError, the server never
// reaching the node.
func (f *Fixture) FailNextBoot(id, fault, lastError string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.provLocked(id).failBoot = [2]string{fault, lastError}
}

// ImageIDs implements Images.
func (f *Fixture) ImageIDs(_ context.Context, name string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodImageIDs, ID: name}); err != nil {
		return nil, err
	}
	return slices.Clone(f.images[name]), nil
}

var (
	_ Images             = (*Fixture)(nil)
	_ IronicProvisioning = (*Fixture)(nil)
)

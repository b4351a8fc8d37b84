package openstacksim

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// ErrNoNova is returned by the server methods of a Cloud made with
// [Options.NoNova] or [Options.NoPlacement] (a site without Nova).
var ErrNoNova = errors.New("openstacksim: Nova is disabled (Options.NoNova or NoPlacement)")

// ErrServerExists is returned by [Cloud.AddServer] for an ID that is already
// stored (live or deleted: Nova never reuses an instance UUID).
var ErrServerExists = errors.New("openstacksim: server already exists")

// Nova server statuses (the API's "status", derived by Nova from vm_state
// and task_state; nova/api/openstack/common.py _STATE_MAP).
const (
	ServerActive      = "ACTIVE"
	ServerBuild       = "BUILD"
	ServerShutoff     = "SHUTOFF"
	ServerError       = "ERROR"
	ServerDeleted     = "DELETED"
	ServerSoftDeleted = "SOFT_DELETED"
)

// SimComputeHost is the nova-compute service host the simulator puts in
// OS-EXT-SRV-ATTR:host when [Server.Host] is empty (the test bed's single
// nova-compute with the Ironic driver).
const SimComputeHost = "testbed-compute"

// Fixed image and flavor of the servers the simulator makes (the test bed's
// seed-servers boots from image "testbed-image" with flavor
// "baremetal.gpu-h100").
const (
	simImageID    = "5b9f6f0e-3b6c-4c8e-9a53-8d0c6f1e2a47"
	simFlavorID   = "b0f1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d"
	simFlavorName = "baremetal.gpu-h100"
)

// serverStates maps an API status to the vm_state and task_state Nova
// stores for it (the inverse of _STATE_MAP's defaults), and the power state
// (nova/compute/power_state.py: 0 NOSTATE, 1 RUNNING, 3 PAUSED, 4 SHUTDOWN,
// 7 SUSPENDED).
var serverStates = map[string]struct {
	vm, task string
	power    int
}{
	"ACTIVE":            {"active", "", 1},
	"BUILD":             {"building", "spawning", 0},
	"SHUTOFF":           {"stopped", "", 4},
	"ERROR":             {"error", "", 0},
	"DELETED":           {"deleted", "", 0},
	"SOFT_DELETED":      {"soft-delete", "", 4},
	"PAUSED":            {"paused", "", 3},
	"SUSPENDED":         {"suspended", "", 7},
	"RESCUE":            {"rescued", "", 1},
	"VERIFY_RESIZE":     {"resized", "", 1},
	"SHELVED":           {"shelved", "", 4},
	"SHELVED_OFFLOADED": {"shelved_offloaded", "", 4},
	"REBOOT":            {"active", "rebooting", 1},
	"HARD_REBOOT":       {"active", "rebooting_hard", 1},
	"REBUILD":           {"active", "rebuilding", 1},
	"MIGRATING":         {"active", "migrating", 1},
	"RESIZE":            {"active", "resize_prep", 1},
	"PASSWORD":          {"active", "updating_password", 1},
}

// Server is a Nova server (instance) as the simulator stores it; the API
// renders it as GET /v2.1/servers/{id} does (see doc.go). String fields that
// are "" are rendered as JSON null where Nova renders null (TaskState).
type Server struct {
	// ID is the instance UUID; AddServer generates one when empty.
	ID string
	// Name is the display name; AddServer defaults it to "server-<id[:8]>".
	Name string
	// TenantID is the owning project; AddServer defaults it to the
	// credential's project ([Cloud.ProjectID]).
	TenantID string
	// UserID is the creating user; AddServer defaults it to the
	// credential's user.
	UserID string
	// Status is the API status, e.g. "ACTIVE" (AddServer's default),
	// "BUILD", "ERROR", "SHUTOFF", "DELETED" (vm_state deleted while the row
	// is not yet deleted: still listed), "SOFT_DELETED". Unknown values are
	// rejected by AddServer.
	Status string
	// TaskState is OS-EXT-STS:task_state, e.g. "spawning", "deleting"; ""
	// renders null. AddServer fills Nova's value for Status when empty
	// ("spawning" for BUILD).
	TaskState string
	// VMState is OS-EXT-STS:vm_state; AddServer (and UpdateServer when
	// Status changed) derive it from Status when empty or unchanged.
	VMState string
	// PowerState is OS-EXT-STS:power_state (0 NOSTATE, 1 RUNNING,
	// 4 SHUTDOWN, …); derived from Status like VMState.
	PowerState int
	// HypervisorHostname is OS-EXT-SRV-ATTR:hypervisor_hostname (Nova's
	// "node"): the Ironic node UUID for a server on bare metal; "" renders
	// null.
	HypervisorHostname string
	// Host is OS-EXT-SRV-ATTR:host, the nova-compute service; AddServer
	// sets [SimComputeHost] when empty and HypervisorHostname is set.
	Host string
	// InstanceName is OS-EXT-SRV-ATTR:instance_name; AddServer sets
	// "instance-%08x" of Nova's internal id when empty.
	InstanceName string
	// Created is created_at (UTC); AddServer sets now when zero.
	Created time.Time
	// Updated is updated_at; AddServer sets Created when zero, UpdateServer
	// sets now unless f changed it.
	Updated time.Time
	// LaunchedAt is OS-SRV-USG:launched_at; zero renders null. AddServer
	// sets Created for a server that is not BUILD.
	LaunchedAt time.Time
	// Metadata is the server metadata (string to string).
	Metadata map[string]string
}

type serverRec struct {
	id        int64 // Nova's internal instances.id: creation order
	s         Server
	deleted   bool
	deletedAt time.Time
}

func cloneServer(s Server) Server {
	s.Metadata = maps.Clone(s.Metadata)
	return s
}

// novaEnabled reports whether the site has Nova.
func (c *Cloud) novaEnabled() bool { return !c.opts.NoNova && !c.opts.NoPlacement }

// AddServer stores a server and returns it as stored, with the defaults
// documented on [Server] filled in. It returns [ErrServerExists] for an ID
// already used (also by a deleted server), [ErrNoNova] on a site without
// Nova, and an error for an unknown Status.
func (c *Cloud) AddServer(s Server) (Server, error) {
	if !c.novaEnabled() {
		return Server{}, ErrNoNova
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addServerLocked(s)
}

func (c *Cloud) addServerLocked(s Server) (Server, error) {
	s = cloneServer(s)
	if s.ID == "" {
		s.ID = newUUID()
	}
	if _, ok := c.servers[s.ID]; ok {
		return Server{}, fmt.Errorf("%w: %s", ErrServerExists, s.ID)
	}
	if s.Status == "" {
		s.Status = ServerActive
	}
	st, ok := serverStates[s.Status]
	if !ok {
		return Server{}, fmt.Errorf("openstacksim: unknown server status %q", s.Status)
	}
	if s.VMState == "" {
		s.VMState = st.vm
		if s.TaskState == "" {
			s.TaskState = st.task
		}
		if s.PowerState == 0 {
			s.PowerState = st.power
		}
	}
	if s.Name == "" {
		s.Name = "server-" + s.ID[:min(8, len(s.ID))]
	}
	if s.TenantID == "" {
		s.TenantID = c.projectID
	}
	if s.UserID == "" {
		s.UserID = c.userID
	}
	if s.Host == "" && s.HypervisorHostname != "" {
		s.Host = SimComputeHost
	}
	if s.Created.IsZero() {
		s.Created = c.now()
	}
	if s.Updated.IsZero() {
		s.Updated = s.Created
	}
	if s.LaunchedAt.IsZero() && s.Status != ServerBuild {
		s.LaunchedAt = s.Created
	}
	if s.Metadata == nil {
		s.Metadata = map[string]string{}
	}
	c.serverSeq++
	if s.InstanceName == "" {
		s.InstanceName = fmt.Sprintf("instance-%08x", c.serverSeq)
	}
	rec := &serverRec{id: c.serverSeq, s: s}
	c.servers[s.ID] = rec
	c.serverOrder = append(c.serverOrder, rec)
	return cloneServer(s), nil
}

// UpdateServer changes a live server through f, like nova-compute or a user
// would. f gets a copy; its ID change is ignored. When f changes Status and
// leaves VMState (PowerState) alone, they are derived from the new Status;
// Updated is set to now unless f set it. It returns [ErrNotFound] for an
// unknown or deleted server, [ErrNoNova] on a site without Nova, and an
// error for an unknown Status (the server is then left unchanged).
func (c *Cloud) UpdateServer(id string, f func(*Server)) error {
	if !c.novaEnabled() {
		return ErrNoNova
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, ok := c.servers[id]
	if !ok || rec.deleted {
		return ErrNotFound
	}
	before := rec.s
	s := cloneServer(rec.s)
	f(&s)
	s.ID = id
	if s.Status != before.Status {
		st, ok := serverStates[s.Status]
		if !ok {
			return fmt.Errorf("openstacksim: unknown server status %q", s.Status)
		}
		if s.VMState == before.VMState {
			s.VMState = st.vm
		}
		if s.PowerState == before.PowerState {
			s.PowerState = st.power
		}
		if s.LaunchedAt.IsZero() && before.Status == ServerBuild && s.Status == ServerActive {
			s.LaunchedAt = c.now()
		}
	}
	if s.Updated.Equal(before.Updated) {
		s.Updated = c.now()
	}
	if s.Metadata == nil {
		s.Metadata = map[string]string{}
	}
	rec.s = s
	return nil
}

// DeleteServer deletes a server the way Nova does (the row is soft-deleted):
// it disappears from lists and GET /v2.1/servers/{id} answers 404, but an
// admin's list with deleted=true still shows it (status DELETED) and it
// stays usable as a paging marker. It returns [ErrNotFound] for an unknown
// or already deleted server and [ErrNoNova] on a site without Nova.
func (c *Cloud) DeleteServer(id string) error {
	if !c.novaEnabled() {
		return ErrNoNova
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.deleteServerLocked(id) {
		return ErrNotFound
	}
	return nil
}

func (c *Cloud) deleteServerLocked(id string) bool {
	rec, ok := c.servers[id]
	if !ok || rec.deleted {
		return false
	}
	now := c.now()
	rec.deleted, rec.deletedAt = true, now
	rec.s.Status, rec.s.VMState, rec.s.TaskState, rec.s.PowerState = ServerDeleted, "deleted", "", 0
	rec.s.Updated = now
	return true
}

// Server returns a copy of the live server with that ID; ok is false for an
// unknown or deleted one.
func (c *Cloud) Server(id string) (s Server, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, found := c.servers[id]
	if !found || rec.deleted {
		return Server{}, false
	}
	return cloneServer(rec.s), true
}

// Servers returns copies of all live (not deleted) servers in creation
// order; nil on a site without Nova.
func (c *Cloud) Servers() []Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Server
	for _, rec := range c.serverOrder {
		if !rec.deleted {
			out = append(out, cloneServer(rec.s))
		}
	}
	return out
}

// serverForNodeLocked makes the ACTIVE (or BUILD while deploying) server a
// node with an instance_uuid implies, as Nova's Ironic driver would have
// booted it: hypervisor_hostname is the node UUID, the tenant the node's
// lessee, else owner, else the credential's project.
func (c *Cloud) serverForNodeLocked(n *Node) {
	if !c.novaEnabled() || n.InstanceUUID == "" {
		return
	}
	if _, ok := c.servers[n.InstanceUUID]; ok {
		return
	}
	tenant := n.Lessee
	if tenant == "" {
		tenant = n.Owner
	}
	name, _ := n.InstanceInfo["display_name"].(string)
	status := ServerActive
	switch n.ProvisionState {
	case "deploying", "wait call-back", "deploy wait":
		status = ServerBuild
	case "deploy failed":
		status = ServerError
	}
	t := n.ProvisionUpdatedAt
	if t.IsZero() {
		t = c.now()
	}
	_, _ = c.addServerLocked(Server{ID: n.InstanceUUID, Name: name, TenantID: tenant, Status: status,
		HypervisorHostname: n.UUID, Created: t})
}

// syncServerForChurnLocked keeps Nova in step with a churn step on a node:
// a new instance_uuid boots a server, deploy outcomes set its status, a
// tear-down marks it deleting, and clearing instance_uuid deletes it.
func (c *Cloud) syncServerForChurnLocked(before, after *Node) {
	if !c.novaEnabled() {
		return
	}
	if before.InstanceUUID != "" && before.InstanceUUID != after.InstanceUUID {
		if rec, ok := c.servers[before.InstanceUUID]; ok && rec.s.HypervisorHostname == after.UUID {
			c.deleteServerLocked(before.InstanceUUID)
		}
	}
	if after.InstanceUUID == "" {
		return
	}
	rec, ok := c.servers[after.InstanceUUID]
	if !ok {
		c.serverForNodeLocked(after)
		return
	}
	if rec.deleted || rec.s.HypervisorHostname != after.UUID || before.ProvisionState == after.ProvisionState {
		return
	}
	s := &rec.s
	now := c.now()
	switch after.ProvisionState {
	case "active":
		s.Status, s.VMState, s.TaskState, s.PowerState = ServerActive, "active", "", 1
		if s.LaunchedAt.IsZero() {
			s.LaunchedAt = now
		}
	case "deploy failed":
		s.Status, s.VMState, s.TaskState, s.PowerState = ServerError, "error", "", 0
	case "deleting", "cleaning":
		s.TaskState = "deleting"
	default:
		return
	}
	s.Updated = now
}

// SeedOrphans makes deliberate orphans on a seeded cloud, for the
// satellite's orphan sweep: ironicSide active nodes that have an
// instance_uuid lose their Nova server (deleted: GET answers 404), and
// novaSide available nodes without an instance get an ACTIVE server whose
// hypervisor_hostname is the node while the node's instance_uuid stays
// empty. Nodes are taken in listing order; it returns the UUIDs of the nodes
// made orphans of each kind (fewer when the fleet has too few candidates).
// It returns [ErrNoNova] on a site without Nova.
func (c *Cloud) SeedOrphans(ironicSide, novaSide int) (ironicNodes, novaNodes []string, err error) {
	if !c.novaEnabled() {
		return nil, nil, ErrNoNova
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rec := range c.nodeOrder {
		n := &rec.n
		switch {
		case len(ironicNodes) < ironicSide && n.ProvisionState == "active" && n.InstanceUUID != "":
			if r, ok := c.servers[n.InstanceUUID]; ok && r.deleted {
				continue
			}
			c.deleteServerLocked(n.InstanceUUID)
			if _, ok := c.servers[n.InstanceUUID]; !ok {
				// never had a server: make the record Nova would have kept
				s, _ := c.addServerLocked(Server{ID: n.InstanceUUID, HypervisorHostname: n.UUID})
				c.deleteServerLocked(s.ID)
			}
			ironicNodes = append(ironicNodes, n.UUID)
		case len(novaNodes) < novaSide && n.ProvisionState == "available" && n.InstanceUUID == "" && !n.Maintenance:
			if _, err := c.addServerLocked(Server{HypervisorHostname: n.UUID, Name: "orphan-" + n.UUID[:8]}); err != nil {
				return ironicNodes, novaNodes, err
			}
			novaNodes = append(novaNodes, n.UUID)
		}
	}
	return slices.Clip(ironicNodes), slices.Clip(novaNodes), nil
}

package openstacksim

import (
	"errors"
	"maps"
	"slices"
	"sort"
	"time"
)

// ErrNotFound is returned by the Go API for an unknown node or provider.
var ErrNotFound = errors.New("openstacksim: not found")

// simConductor is the conductor host name: the test bed's [DEFAULT]host.
const simConductor = "127.0.0.1"

// Node is an Ironic node as the simulator stores it. String fields that are
// "" are rendered as JSON null by the API (except ConductorGroup, which
// Ironic renders as ""); zero times are rendered as null.
type Node struct {
	// UUID identifies the node; AddNode generates one when empty.
	UUID string
	// Name is the logical name (API 1.5+), e.g. "node-001".
	Name string
	// Driver is the hardware type; AddNode defaults it to "fake-hardware".
	Driver string
	// ProvisionState is e.g. "enroll" (AddNode's default), "available",
	// "active", "clean failed".
	ProvisionState string
	// TargetProvisionState is where an in-flight transition is heading.
	TargetProvisionState string
	// PowerState is "power on", "power off" or "" (null: unknown).
	PowerState string
	// TargetPowerState is set during a power action.
	TargetPowerState string
	// Maintenance is set when an operator or Ironic took the node out of
	// automation.
	Maintenance bool
	// MaintenanceReason is the free-text reason for Maintenance.
	MaintenanceReason string
	// Fault is why Ironic itself set maintenance ("power failure",
	// "clean failure", "rescue abort failure"); API 1.42+.
	Fault string
	// LastError is the error of the last failed operation.
	LastError string
	// InstanceUUID is the consumer (Nova instance) lock.
	InstanceUUID string
	// AllocationUUID is the Ironic allocation (API 1.52+).
	AllocationUUID string
	// ResourceClass is the Placement resource class (API 1.21+).
	ResourceClass string
	// ConductorGroup is the conductor affinity group (API 1.46+).
	ConductorGroup string
	// Conductor is the host of the managing conductor (API 1.49+); AddNode
	// sets "127.0.0.1" (the test bed's conductor host) when empty.
	Conductor string
	// Owner is the project owning the hardware (API 1.50+). SeedLikeTestbed
	// and API-created nodes get the credential's project, as on the test
	// bed (a project-scoped admin creates nodes it owns).
	Owner string
	// Lessee is the project leasing the node (API 1.65+).
	Lessee string
	// Reservation is the conductor host holding the node lock; while it is
	// set, trait writes, maintenance, PATCH and DELETE get 409 NodeLocked.
	Reservation string
	// Retired marks a retired node (API 1.61+).
	Retired bool
	// Traits are the node traits (API 1.37+), at most 50.
	Traits []string
	// Properties is the free-form hardware description (cpus, memory_mb…).
	Properties map[string]any
	// Extra is free-form operator data.
	Extra map[string]any
	// CreatedAt is the row creation time (UTC); AddNode sets it when zero.
	CreatedAt time.Time
	// UpdatedAt is the last change of the row; it stays zero (null) until
	// the first change, as in Ironic. Lock-taking API calls bump it.
	UpdatedAt time.Time
	// ProvisionUpdatedAt is when ProvisionState last changed; zero (null)
	// for a node never provisioned.
	ProvisionUpdatedAt time.Time

	// RetiredReason explains Retired (API 1.61+). This and the next three
	// fields go beyond the agreed Node shape; they are optional.
	RetiredReason string
	// Description is the node description (API 1.51+).
	Description string
	// DriverInfo is the driver's access data (e.g. {"fake_bmc": ...}).
	DriverInfo map[string]any
	// InstanceInfo is the deploy data (e.g. {"display_name": ...}).
	InstanceInfo map[string]any

	// InspectionFinishedAt is when the last inspection finished (API
	// 1.6+); zero (null) for a node never inspected.
	InspectionFinishedAt time.Time
	// Inventory is the inspection inventory in ironic-python-agent's shape
	// served by GET /v1/nodes/{node}/inventory (API 1.81+); nil: none
	// (404). PluginData is served beside it ({} when nil).
	Inventory  map[string]any
	PluginData map[string]any
	// BIOS are the BIOS settings by name served by GET
	// /v1/nodes/{node}/bios (API 1.40+), sorted by name; nil: none.
	BIOS map[string]string
}

type nodeRec struct {
	id int64 // Ironic's internal id: creation order
	n  Node
}

func cloneNode(n Node) Node {
	n.Traits = slices.Clone(n.Traits)
	n.Properties = maps.Clone(n.Properties)
	n.Extra = maps.Clone(n.Extra)
	n.DriverInfo = maps.Clone(n.DriverInfo)
	n.InstanceInfo = maps.Clone(n.InstanceInfo)
	n.Inventory = maps.Clone(n.Inventory)
	n.PluginData = maps.Clone(n.PluginData)
	n.BIOS = maps.Clone(n.BIOS)
	return n
}

// AddNode stores a node and returns it as stored: UUID generated when
// empty, Driver "fake-hardware" and ProvisionState "enroll" when empty,
// Conductor "127.0.0.1" when empty, CreatedAt now when zero, nil maps and
// trait list made empty. A node with the same UUID is replaced (keeping its
// place in the listing order). Names are not checked for uniqueness here.
func (c *Cloud) AddNode(n Node) Node {
	n = cloneNode(n)
	c.fillNodeDefaults(&n)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putNodeLocked(n)
	return cloneNode(n)
}

// fillNodeDefaults fills in what a new node gets when not given: a UUID,
// the fake-hardware driver, enroll, this conductor, created now, and empty
// traits, properties and extra.
func (c *Cloud) fillNodeDefaults(n *Node) {
	if n.UUID == "" {
		n.UUID = newUUID()
	}
	if n.Driver == "" {
		n.Driver = "fake-hardware"
	}
	if n.ProvisionState == "" {
		n.ProvisionState = "enroll"
	}
	if n.Conductor == "" {
		n.Conductor = simConductor
	}
	if n.CreatedAt.IsZero() {
		n.CreatedAt = c.now()
	}
	if n.Traits == nil {
		n.Traits = []string{}
	}
	if n.Properties == nil {
		n.Properties = map[string]any{}
	}
	if n.Extra == nil {
		n.Extra = map[string]any{}
	}
}

func (c *Cloud) putNodeLocked(n Node) *nodeRec {
	if rec, ok := c.nodes[n.UUID]; ok {
		rec.n = n
		return rec
	}
	c.nextID++
	rec := &nodeRec{id: c.nextID, n: n}
	c.nodes[n.UUID] = rec
	c.nodeOrder = append(c.nodeOrder, rec)
	return rec
}

// UpdateNode changes a stored node through f, like another writer (the
// conductor, an operator) would. f gets a copy; its UUID change is ignored.
// UpdatedAt is set to now unless f set it; ProvisionUpdatedAt is set to now
// when f changed ProvisionState and left ProvisionUpdatedAt alone. It
// returns ErrNotFound for an unknown UUID.
func (c *Cloud) UpdateNode(uuid string, f func(*Node)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, ok := c.nodes[uuid]
	if !ok {
		return ErrNotFound
	}
	before := rec.n
	n := cloneNode(rec.n)
	f(&n)
	n.UUID = uuid
	now := c.now()
	if n.UpdatedAt.Equal(before.UpdatedAt) {
		n.UpdatedAt = now
	}
	if n.ProvisionState != before.ProvisionState && n.ProvisionUpdatedAt.Equal(before.ProvisionUpdatedAt) {
		n.ProvisionUpdatedAt = now
	}
	rec.n = n
	return nil
}

// DeleteNode removes a node (not its resource provider). It returns
// ErrNotFound for an unknown UUID.
func (c *Cloud) DeleteNode(uuid string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.nodes[uuid]; !ok {
		return ErrNotFound
	}
	c.deleteNodeLocked(uuid)
	return nil
}

func (c *Cloud) deleteNodeLocked(uuid string) {
	delete(c.nodes, uuid)
	c.nodeOrder = slices.DeleteFunc(c.nodeOrder, func(r *nodeRec) bool { return r.n.UUID == uuid })
	delete(c.churn, uuid)
}

// Node returns a copy of the node with that UUID.
func (c *Cloud) Node(uuid string) (Node, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, ok := c.nodes[uuid]
	if !ok {
		return Node{}, false
	}
	return cloneNode(rec.n), true
}

// Nodes returns copies of all nodes in creation order (Ironic's default
// listing order).
func (c *Cloud) Nodes() []Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Node, 0, len(c.nodeOrder))
	for _, rec := range c.nodeOrder {
		out = append(out, cloneNode(rec.n))
	}
	return out
}

// provider is a Placement resource provider.
type provider struct {
	uuid, name string
	generation int64
	traits     []string // sorted
	created    time.Time
	updated    time.Time
	inventory  map[string]inventory
	seq        int64 // creation order
}

type inventory struct {
	Total, Reserved int
}

// AddProvider creates a Placement resource provider (generation 0) or, when
// the UUID exists, renames it; traits, when non-empty, are then set like a
// trait PUT (generation + 1 when the set changes). Traits not yet defined in
// Placement are defined on the way.
func (c *Cloud) AddProvider(uuid, name string, traits []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	p, ok := c.providers[uuid]
	if !ok {
		p = c.newProviderLocked(uuid, "", now, now)
	}
	p.name = name
	if len(traits) > 0 {
		c.setProviderTraitsLocked(p, traits, false)
	}
}

// newProviderLocked stores a new resource provider without traits,
// numbered in creation order.
func (c *Cloud) newProviderLocked(uuid, name string, created, updated time.Time) *provider {
	c.provSeq++
	p := &provider{uuid: uuid, name: name, created: created, updated: updated, traits: []string{}, seq: c.provSeq}
	c.providers[uuid] = p
	return p
}

// DeleteProvider removes a resource provider. It returns ErrNotFound for an
// unknown UUID.
func (c *Cloud) DeleteProvider(uuid string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.providers[uuid]; !ok {
		return ErrNotFound
	}
	delete(c.providers, uuid)
	return nil
}

// ProviderTraits returns the traits (sorted) and generation of a resource
// provider; ok is false when it does not exist.
func (c *Cloud) ProviderTraits(uuid string) (traits []string, generation int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.providers[uuid]
	if !ok {
		return nil, 0, false
	}
	return slices.Clone(p.traits), p.generation, true
}

// SetProviderTraits replaces a provider's traits and always bumps its
// generation, as another writer (nova-compute) would; undefined traits are
// defined on the way. (Placement's own PUT bumps only when the set
// changes.) It returns ErrNotFound for an unknown provider.
func (c *Cloud) SetProviderTraits(uuid string, traits []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.providers[uuid]
	if !ok {
		return ErrNotFound
	}
	c.setProviderTraitsLocked(p, traits, true)
	return nil
}

// BumpProviderGeneration increments a provider's generation without other
// changes, like an inventory update by nova-compute. It returns ErrNotFound
// for an unknown provider.
func (c *Cloud) BumpProviderGeneration(uuid string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.providers[uuid]
	if !ok {
		return ErrNotFound
	}
	p.generation++
	p.updated = c.now()
	return nil
}

// setProviderTraitsLocked replaces the provider's traits. Like Placement's
// _set_traits it bumps the generation only when the set changes, unless
// always is true (a concurrent writer that changes something else too).
func (c *Cloud) setProviderTraitsLocked(p *provider, traits []string, always bool) {
	now := c.now()
	set := map[string]bool{}
	for _, t := range traits {
		if _, ok := c.traits[t]; !ok {
			c.traits[t] = now
		}
		set[t] = true
	}
	next := sortedKeys(set)
	if slices.Equal(next, p.traits) && !always {
		return
	}
	p.traits = next
	p.generation++
	p.updated = now
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// DefineTrait defines a trait in Placement (like PUT /traits/{name}); a
// no-op when it exists.
func (c *Cloud) DefineTrait(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.traits[name]; !ok {
		c.traits[name] = c.now()
	}
}

// UndefineTrait removes a trait from Placement, also from every provider
// that has it (bumping their generations), so that tests can start from "the
// custom trait does not exist".
func (c *Cloud) UndefineTrait(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.traits, name)
	for _, p := range c.providers {
		if i := slices.Index(p.traits, name); i >= 0 {
			p.traits = slices.Delete(p.traits, i, i+1)
			p.generation++
			p.updated = c.now()
		}
	}
}

// TraitDefined reports whether Placement knows the trait.
func (c *Cloud) TraitDefined(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.traits[name]
	return ok
}

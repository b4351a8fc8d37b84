package site

import (
	"context"

	"github.com/ironlink/ironlink/satellite/glance"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/placement"
)

// Ironic is what the satellite needs of Ironic (docs/design/openstack.md §1, §6): the
// observation credential's listing, reads and gate trait writes (agent,
// gate), and the operations credential's provisioning calls (operations).
// One implementation serves both; each credential's access rules allow its
// own methods only. Implementations are safe for concurrent use. Errors
// wrap ironic.ErrNodeNotFound (the node itself is gone),
// ironic.ErrNodeLocked (a write kept meeting 409 NodeLocked) and
// ironic.ErrListingIncomplete where noted; the provisioning methods return
// OpenStack's HTTP error otherwise (openstack.StatusCode reads it: 400 a
// request Ironic refuses, 409 a name or MAC that exists); every other
// error is transient for the caller (retry on the next poll, sweep, resync
// or pass).
type Ironic interface {
	IronicProvisioning

	// ListNodes returns every node the credential may see, in Ironic's
	// order, each with Missing/Unsent telling which fields were not sent.
	// Read-only; may be called any number of times. It returns the whole
	// listing or an error wrapping ironic.ErrListingIncomplete and no
	// nodes — never a partial list, so a node absent from a successful
	// result is gone.
	ListNodes(ctx context.Context) ([]ironic.Node, error)
	// GetNode reads one node by UUID with the same fields as ListNodes.
	// Read-only; may be called any number of times. A node Ironic does
	// not have wraps ironic.ErrNodeNotFound.
	GetNode(ctx context.Context, id string) (ironic.Node, error)
	// NodeTraits returns the node's traits (never nil on success).
	// Read-only; may be called any number of times; ErrNodeNotFound as
	// GetNode.
	NodeTraits(ctx context.Context, nodeID string) ([]string, error)
	// AddTrait puts trait on the node. Idempotent: adding a trait the node
	// has is a success and changes nothing; may be called many times.
	AddTrait(ctx context.Context, nodeID, trait string) error
	// RemoveTrait removes trait from the node. Idempotent: removing a
	// trait the node lacks is a success and changes nothing; may be
	// called many times.
	RemoveTrait(ctx context.Context, nodeID, trait string) error
}

// IronicProvisioning are the operations credential's Ironic calls (Ironic
// API reference "Nodes", "Node State Summary", "Ports", "Drivers"), which
// move a node through Ironic's provision state machine (docs/design/openstack.md §1.2).
// Reads may be called any number of times; the idempotency of each write is
// given with it, and the operations runner reads the node before every
// write so that a repeated pass never repeats a side effect.
type IronicProvisioning interface {
	// NodeDetail reads the whole node by UUID or name. Read-only. A node
	// Ironic does not have wraps ironic.ErrNodeNotFound.
	NodeDetail(ctx context.Context, ident string) (ironic.NodeDetail, error)
	// CreateNode creates a node from the Create Node request body. Not
	// idempotent: a second call with the same name answers 409.
	CreateNode(ctx context.Context, body map[string]any) (ironic.NodeDetail, error)
	// ListPorts lists the node's ports. Read-only.
	ListPorts(ctx context.Context, nodeUUID string) ([]ironic.Port, error)
	// CreatePort creates a port. Not idempotent: a MAC that exists
	// answers 409.
	CreatePort(ctx context.Context, nodeUUID, mac string, pxe bool) error
	// PortByAddress returns the port with MAC mac and its node (found
	// false: no port has it). Read-only.
	PortByAddress(ctx context.Context, mac string) (ironic.Port, bool, error)
	// DeleteNode deletes a node (the operations runner deletes only a node
	// its own ENROL created and could not finish). Idempotent: a node
	// Ironic does not have is a success; Ironic refuses a node in a state
	// it cannot delete from (400/409).
	DeleteNode(ctx context.Context, nodeID string) error
	// SetTraits replaces the node's traits. Idempotent.
	SetTraits(ctx context.Context, nodeID string, traits []string) error
	// PatchNode applies a JSON patch and returns the node after it.
	// Idempotent for "add" of a value (the runner's only use).
	PatchNode(ctx context.Context, nodeID string, ops []ironic.PatchOp) (ironic.NodeDetail, error)
	// SetProvisionState asks for a provision-state change (target
	// "manage", "inspect", "clean", "provide", "active", "deleted",
	// "abort") with extra request keys. Not idempotent: a target the
	// current state does not allow answers 400, a node a conductor holds
	// 409 NodeLocked (retried).
	SetProvisionState(ctx context.Context, nodeID, target string, extra map[string]any) error
	// Drivers lists the enabled hardware types, sorted. Read-only.
	Drivers(ctx context.Context) ([]string, error)
	// ChangePowerState asks for a power change (target "power on", "power
	// off", "soft power off") with a timeout in seconds (0: Ironic's
	// default). Not idempotent while a change is in progress: Ironic
	// answers 409 for a node in a power transition or locked (retried when
	// locked); the runner reads power_state and target_power_state first.
	ChangePowerState(ctx context.Context, nodeID, target string, timeoutSeconds int) error
	// SetMaintenanceFlag sets the maintenance flag with a reason.
	// Idempotent.
	SetMaintenanceFlag(ctx context.Context, nodeID, reason string) error
	// ClearMaintenanceFlag clears the maintenance flag. Idempotent.
	ClearMaintenanceFlag(ctx context.Context, nodeID string) error
}

// Placement is what the satellite needs of Placement (docs/design/openstack.md §3).
// Implementations are safe for concurrent use. Errors wrap
// placement.ErrProviderNotFound (no provider with that UUID) and
// placement.ErrGenerationConflict (other writers kept winning) where
// noted; every other error is transient for the caller.
type Placement interface {
	// Providers returns the UUIDs of all resource providers. Read-only;
	// may be called any number of times.
	Providers(ctx context.Context) (map[string]bool, error)
	// ProvidersWithTrait returns the providers carrying trait, and whether
	// Placement knows the trait at all (false: empty set, nil error).
	// Read-only; may be called any number of times.
	ProvidersWithTrait(ctx context.Context, trait string) (set map[string]bool, traitDefined bool, err error)
	// EnsureTrait makes sure the custom trait exists. Idempotent: may be
	// called many times; the trait is created at most once.
	EnsureTrait(ctx context.Context, trait string) error
	// ProviderTraits returns a provider's traits and generation.
	// Read-only; may be called any number of times; a missing provider
	// wraps placement.ErrProviderNotFound.
	ProviderTraits(ctx context.Context, rpUUID string) ([]string, int64, error)
	// SetProviderTrait adds (present) or removes (!present) one trait and
	// leaves every other trait alone (read, delta, write with the
	// generation). Idempotent: a call that finds the provider as wanted
	// writes nothing and reports Changed false; may be called many times.
	// A missing provider wraps placement.ErrProviderNotFound.
	SetProviderTrait(ctx context.Context, rpUUID, trait string, present bool) (placement.SetResult, error)
}

// Nova is what the satellite needs of Nova: the orphan sweep's reads
// (docs/design/openstack.md §4) and the NOVA_* operations' calls (NovaOperations).
// Implementations are safe for concurrent use. The reads may be called any
// number of times.
type Nova interface {
	NovaOperations

	// ListServers returns every live server of every project, or an error
	// (wrapping nova.ErrListingIncomplete, or answering 403 when the
	// credential may not list all projects) and no servers — never a
	// partial list.
	ListServers(ctx context.Context) ([]nova.Server, error)
	// GetServer reads one server of any project; a server Nova does not
	// know wraps nova.ErrServerNotFound.
	GetServer(ctx context.Context, id string) (nova.Server, error)
}

// NovaOperations are the operations credential's Nova calls (compute API
// reference "Servers", "Flavors"), at nova.OperationsMicroversion.
type NovaOperations interface {
	// ServersNamed lists the live servers named exactly name. Read-only.
	ServersNamed(ctx context.Context, name string) ([]nova.Server, error)
	// Flavor reads a flavor by id; an unknown one wraps
	// nova.ErrFlavorNotFound. Read-only.
	Flavor(ctx context.Context, id string) (nova.Flavor, error)
	// Flavors lists every flavor with its extra_specs. Read-only.
	Flavors(ctx context.Context) ([]nova.Flavor, error)
	// CreateServer boots a server on a node and returns its id. Not
	// idempotent: look for the server by name before calling again.
	CreateServer(ctx context.Context, o nova.CreateServerOpts) (string, error)
	// DeleteServer deletes a server. Idempotent: an unknown server is a
	// success.
	DeleteServer(ctx context.Context, id string) error
}

// Images resolves image names (Glance) for NOVA_CREATE.
type Images interface {
	// ImageIDs returns the ids of the images named name. Read-only.
	ImageIDs(ctx context.Context, name string) ([]string, error)
}

// The gophercloud-backed clients are the production implementations.
var (
	_ Ironic    = (*ironic.Client)(nil)
	_ Placement = (*placement.Client)(nil)
	_ Nova      = (*nova.Client)(nil)
	_ Images    = (*glance.Client)(nil)
)

// IronicHardware reads a node's hardware as inspection recorded it (Ironic
// api-ref "Node Inventory", "Node Bios"). Optional: the agent uses it when
// its Ironic implements it too (the gophercloud client does). Read-only;
// may be called any number of times. Errors wrap ironic.ErrNoInventory,
// ironic.ErrHardwareUnsupported, ironic.ErrHardwareTooLarge or
// ironic.ErrNodeNotFound where they apply; anything else is transient.
type IronicHardware interface {
	// NodeInventory reads the node's inspection inventory (API 1.81).
	NodeInventory(ctx context.Context, nodeID string) (ironic.Inventory, error)
	// NodeBIOS reads the node's BIOS settings (API 1.40).
	NodeBIOS(ctx context.Context, nodeID string) ([]ironic.BIOSSetting, error)
}

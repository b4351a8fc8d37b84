package site

import (
	"context"

	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/placement"
)

// Ironic is what the satellite needs of Ironic (OPENSTACK.md §1, §6).
// Implementations are safe for concurrent use. Errors wrap
// ironic.ErrNodeNotFound (the node itself is gone), ironic.ErrNodeLocked
// (a write kept meeting 409 NodeLocked) and ironic.ErrListingIncomplete
// where noted; every other error is transient for the caller (retry on the
// next poll, sweep or resync).
type Ironic interface {
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

// Placement is what the satellite needs of Placement (OPENSTACK.md §3).
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

// Nova is what the orphan sweep needs of Nova (OPENSTACK.md §4).
// Implementations are safe for concurrent use. Both methods are read-only
// and may be called any number of times.
type Nova interface {
	// ListServers returns every live server of every project, or an error
	// (wrapping nova.ErrListingIncomplete, or answering 403 when the
	// credential may not list all projects) and no servers — never a
	// partial list.
	ListServers(ctx context.Context) ([]nova.Server, error)
	// GetServer reads one server of any project; a server Nova does not
	// know wraps nova.ErrServerNotFound.
	GetServer(ctx context.Context, id string) (nova.Server, error)
}

// The gophercloud-backed clients are the production implementations.
var (
	_ Ironic    = (*ironic.Client)(nil)
	_ Placement = (*placement.Client)(nil)
	_ Nova      = (*nova.Client)(nil)
)

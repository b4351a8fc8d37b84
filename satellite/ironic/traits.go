package ironic

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/ironlink/ironlink/internal/logkey"
	"github.com/ironlink/ironlink/satellite/openstack"
)

// writeRetryable retries trait writes on 409 (NodeLocked: a conductor
// holds the node's lock for a power sync or a step) as well as on
// transient failures. Both writes are idempotent, so a retry after a lost
// response is safe.
func writeRetryable(err error) bool {
	return openstack.StatusCode(err) == http.StatusConflict || openstack.IsTransient(err)
}

func (c *Client) traitURL(nodeID, trait string) string {
	return c.sc.ServiceURL("nodes", url.PathEscape(nodeID), "traits", url.PathEscape(trait))
}

// wrapWrite turns a failed trait write into a clear error.
func wrapWrite(op, nodeID string, err error) error {
	switch openstack.StatusCode(err) {
	case http.StatusConflict:
		return fmt.Errorf("%w: %s on node %s still refused with 409 (node locked by a conductor operation?): %w", ErrNodeLocked, op, nodeID, err)
	case http.StatusNotFound:
		return fmt.Errorf("%w: %s: %s: %w", ErrNodeNotFound, op, nodeID, err)
	}
	return fmt.Errorf("ironic: %s on node %s: %w", op, nodeID, err)
}

// AddTrait puts trait on the node (Ironic api-ref "Node Traits", "Add a
// Trait": PUT /v1/nodes/{node_ident}/traits/{trait}, 204). Adding a trait
// the node already has is a success. 409 NodeLocked, 502/503/504 and
// timeouts are retried per WriteRetry; a persistent 409 wraps
// ErrNodeLocked, a 404 wraps ErrNodeNotFound. Ironic allows at most 50
// traits per node (400 beyond that).
func (c *Client) AddTrait(ctx context.Context, nodeID, trait string) error {
	if _, err := c.version(); err != nil {
		return err
	}
	if err := openstack.ValidateTraitName(trait, false); err != nil {
		return fmt.Errorf("ironic: add trait: %w", err)
	}
	op := "add trait " + trait
	_, _, err := openstack.Retry(ctx, c.WriteRetry, c.log, "ironic: "+op+" on node "+nodeID, writeRetryable, func(ctx context.Context) (struct{}, error) {
		_, err := c.sc.Put(ctx, c.traitURL(nodeID, trait), nil, nil, &gophercloud.RequestOpts{OkCodes: []int{http.StatusNoContent, http.StatusOK}})
		return struct{}{}, err
	})
	if err != nil {
		return wrapWrite(op, nodeID, err)
	}
	c.log.Debug("node trait added", logkey.DeviceID, nodeID, "trait", trait)
	return nil
}

// RemoveTrait removes trait from the node (Ironic api-ref "Node Traits",
// "Remove a Trait": DELETE /v1/nodes/{node_ident}/traits/{trait}, 204).
// Removing a trait the node does not have is a success: on a 404 the
// node's traits are read to tell "trait absent" (success) from "node
// absent" (ErrNodeNotFound). Retries and errors as for AddTrait.
func (c *Client) RemoveTrait(ctx context.Context, nodeID, trait string) error {
	if _, err := c.version(); err != nil {
		return err
	}
	if err := openstack.ValidateTraitName(trait, false); err != nil {
		return fmt.Errorf("ironic: remove trait: %w", err)
	}
	op := "remove trait " + trait
	_, _, err := openstack.Retry(ctx, c.WriteRetry, c.log, "ironic: "+op+" on node "+nodeID, writeRetryable, func(ctx context.Context) (struct{}, error) {
		_, err := c.sc.Delete(ctx, c.traitURL(nodeID, trait), &gophercloud.RequestOpts{OkCodes: []int{http.StatusNoContent, http.StatusOK}})
		return struct{}{}, err
	})
	if err == nil {
		c.log.Debug("node trait removed", logkey.DeviceID, nodeID, "trait", trait)
		return nil
	}
	if openstack.StatusCode(err) != http.StatusNotFound {
		return wrapWrite(op, nodeID, err)
	}
	traits, terr := c.NodeTraits(ctx, nodeID)
	if terr != nil {
		return terr // ErrNodeNotFound when the node itself is gone
	}
	for _, t := range traits {
		if t == trait {
			return fmt.Errorf("ironic: %s on node %s: 404 although the node lists the trait: %w", op, nodeID, err)
		}
	}
	return nil
}

// NodeTraits returns the node's traits (Ironic api-ref "Node Traits",
// "List Traits of a Node": GET /v1/nodes/{node_ident}/traits →
// {"traits": [...]}); never nil on success. A 404 wraps ErrNodeNotFound.
func (c *Client) NodeTraits(ctx context.Context, nodeID string) ([]string, error) {
	if _, err := c.version(); err != nil {
		return nil, err
	}
	u := c.sc.ServiceURL("nodes", url.PathEscape(nodeID), "traits")
	body, _, err := openstack.Retry(ctx, c.ReadRetry, c.log, "ironic: list traits of node "+nodeID, nil, func(ctx context.Context) (struct {
		Traits []string `json:"traits"`
	}, error) {
		var b struct {
			Traits []string `json:"traits"`
		}
		_, err := c.sc.Get(ctx, u, &b, &gophercloud.RequestOpts{OkCodes: []int{http.StatusOK}})
		return b, err
	})
	if err != nil {
		if openstack.StatusCode(err) == http.StatusNotFound {
			return nil, fmt.Errorf("%w: %s: %w", ErrNodeNotFound, nodeID, err)
		}
		return nil, fmt.Errorf("ironic: list traits of node %s: %w", nodeID, err)
	}
	if body.Traits == nil {
		body.Traits = []string{}
	}
	return body.Traits, nil
}

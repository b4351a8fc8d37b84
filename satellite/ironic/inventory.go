package ironic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/ironlink/ironlink/satellite/openstack"
)

// Errors of the hardware reads, for errors.Is.
var (
	// ErrNoInventory: Ironic has no inventory for the node (404 "Node
	// inventory record for node … could not be found": never inspected,
	// or a driver that does not inspect).
	ErrNoInventory = errors.New("ironic: node has no inventory")
	// ErrHardwareUnsupported: Ironic does not serve the read at its
	// microversion (406, or 404 for the route itself on an older Ironic).
	ErrHardwareUnsupported = errors.New("ironic: hardware read not supported by this Ironic")
	// ErrHardwareTooLarge: the answer exceeded MaxHardwareBytes.
	ErrHardwareTooLarge = errors.New("ironic: hardware document too large")
)

// Microversions of the hardware reads (Ironic api-ref "Node Inventory",
// "Node Bios").
var (
	// InventoryVersion: GET /v1/nodes/{node}/inventory.
	InventoryVersion = openstack.Microversion{Major: 1, Minor: 81}
	// BIOSVersion: GET /v1/nodes/{node}/bios.
	BIOSVersion = openstack.Microversion{Major: 1, Minor: 40}
)

// MaxHardwareBytes bounds one inventory or BIOS answer read from Ironic
// (4 MiB); a larger one is refused with ErrHardwareTooLarge, never decoded.
const MaxHardwareBytes = 4 << 20

// Inventory is a node's inspection data as Ironic serves it: the
// inventory in ironic-python-agent's shape and the plugin data (for
// example the pci-devices collector's "pci_devices"), both undecoded.
type Inventory struct {
	// Inventory is the "inventory" object (cpu, memory, disks, interfaces, ...).
	Inventory json.RawMessage `json:"inventory"`
	// PluginData is the "plugin_data" object (e.g. pci_devices).
	PluginData json.RawMessage `json:"plugin_data"`
}

// BIOSSetting is one BIOS setting of a node.
type BIOSSetting struct {
	// Name is the setting's name, e.g. "HyperThreading".
	Name string `json:"name"`
	// Value is its current value, e.g. "Disabled".
	Value string `json:"value"`
}

// NodeInventory reads the node's inspection inventory (GET
// /v1/nodes/{id}/inventory at API 1.81). Read-only. Errors wrap
// ErrNoInventory (404 for the inventory), ErrNodeNotFound (404 for the
// node), ErrHardwareUnsupported (406), ErrHardwareTooLarge, or the HTTP
// error after ReadRetry.
func (c *Client) NodeInventory(ctx context.Context, id string) (Inventory, error) {
	var inv Inventory
	body, err := c.hardwareGet(ctx, id, "inventory", InventoryVersion)
	if err != nil {
		return inv, err
	}
	if err := json.Unmarshal(body, &inv); err != nil {
		return inv, fmt.Errorf("ironic: inventory of %s: %w", id, err)
	}
	return inv, nil
}

// NodeBIOS reads the node's BIOS settings (GET /v1/nodes/{id}/bios at API
// 1.40), in Ironic's order. Read-only. Errors as NodeInventory (but
// ErrNoInventory: a node without settings answers an empty list).
func (c *Client) NodeBIOS(ctx context.Context, id string) ([]BIOSSetting, error) {
	body, err := c.hardwareGet(ctx, id, "bios", BIOSVersion)
	if err != nil {
		return nil, err
	}
	var page struct {
		BIOS []BIOSSetting `json:"bios"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, fmt.Errorf("ironic: bios of %s: %w", id, err)
	}
	return page.BIOS, nil
}

// hardwareGet GETs /v1/nodes/{id}/{sub} at microversion v and returns the
// body, at most MaxHardwareBytes.
func (c *Client) hardwareGet(ctx context.Context, id, sub string, v openstack.Microversion) ([]byte, error) {
	if _, err := c.version(); err != nil {
		return nil, err
	}
	sc := *c.sc // a copy: this request's microversion only
	sc.Microversion = v.String()
	u := sc.ServiceURL("nodes", url.PathEscape(id), sub)
	op := "ironic: get " + sub + " of " + id
	body, _, err := openstack.Retry(ctx, c.ReadRetry, c.log, op, nil, func(ctx context.Context) ([]byte, error) {
		resp, err := sc.Request(ctx, http.MethodGet, u, &gophercloud.RequestOpts{OkCodes: []int{http.StatusOK}, KeepResponseBody: true})
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, MaxHardwareBytes+1))
		if err != nil {
			return nil, err
		}
		if len(b) > MaxHardwareBytes {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrHardwareTooLarge, MaxHardwareBytes)
		}
		return b, nil
	})
	if err == nil {
		return body, nil
	}
	switch openstack.StatusCode(err) {
	case http.StatusNotAcceptable:
		return nil, fmt.Errorf("%w: %s: %w", ErrHardwareUnsupported, op, err)
	case http.StatusNotFound:
		msg := strings.ToLower(string(openstack.ResponseBody(err)))
		switch {
		case strings.Contains(msg, "inventory"):
			return nil, fmt.Errorf("%w: %s: %w", ErrNoInventory, op, err)
		case strings.Contains(msg, "node") && strings.Contains(msg, "could not be found"):
			return nil, fmt.Errorf("%w: %s: %w", ErrNodeNotFound, id, err)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrHardwareUnsupported, op, err)
	}
	return nil, fmt.Errorf("%s: %w", op, err)
}

package operations

import (
	"context"

	"github.com/ironlink/ironlink/hub/store"
)

// Store is what the operation service reads and writes of the hub's
// database (*store.Store implements it): the operator's side of
// operations, devices by id or name, and whether a site exists.
type Store interface {
	store.Operations
	// GetDevice: see store.Store.GetDevice.
	GetDevice(ctx context.Context, id string) (store.Device, error)
	// DevicesByName: see store.Store.DevicesByName.
	DevicesByName(ctx context.Context, name, site string) ([]store.DeviceRef, error)
	// SiteExists: see store.Store.SiteExists.
	SiteExists(ctx context.Context, name string) (bool, error)
}

package fleet

import (
	"context"

	"github.com/ironlink/ironlink/hub/store"
)

// Store is what the operator API reads and writes of the hub's database
// (*store.Store implements it): current and past state, the operator's
// side of commands, the change feed with its LISTEN hints, and a device's
// recent operations.
type Store interface {
	store.Queries
	store.AsOf
	store.Commands
	store.Feed
	store.Notifier
	// RecentOperations: see store.Store.RecentOperations.
	RecentOperations(ctx context.Context, deviceID string, limit int) ([]store.Operation, error)
}

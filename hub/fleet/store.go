package fleet

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ironlink/ironlink/hub/store"
)

// Store is what the operator API reads and writes of the hub's database
// (*store.Store implements it): current and past state, the operator's
// side of commands, the pool its change feed reader reads (package feed),
// the LISTEN hints, and a device's recent operations.
type Store interface {
	store.Queries
	store.AsOf
	store.Commands
	store.Notifier
	// Pool: see store.Store.Pool (the feed's reader reads through it).
	Pool() *pgxpool.Pool
	// RecentOperations: see store.Store.RecentOperations.
	RecentOperations(ctx context.Context, deviceID string, limit int) ([]store.Operation, error)
	// DeviceHardwareJSON: see store.Store.DeviceHardwareJSON.
	DeviceHardwareJSON(ctx context.Context, id string) ([]byte, error)
	// HardwareOfDevices: see store.Store.HardwareOfDevices.
	HardwareOfDevices(ctx context.Context, site string, sites []string, class string) ([]store.DeviceHardware, error)
	// HardwareHistory: see store.Store.HardwareHistory.
	HardwareHistory(ctx context.Context, id string, limit int) ([]store.HardwareHistoryEntry, error)
	// ValidationRuns: see store.Store.ValidationRuns.
	ValidationRuns(ctx context.Context, deviceID, site string, limit int) ([]store.ValidationRun, error)
}

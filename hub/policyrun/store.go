package policyrun

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ironlink/ironlink/hub/store"
)

// Store is what the evaluator reads and records in the hub's database
// (*store.Store implements it): the policy's reads and writes, and the
// pool it takes the leader lock's connection from.
type Store interface {
	store.Policy
	// The per-label guards' reads (domains.go): see the store's methods.
	RecentPolicyQuarantines(ctx context.Context, since time.Time) ([]store.DomainAction, error)
	LabelCounts(ctx context.Context, keys []string) (map[string]map[string]map[string]int, error)
	DeviceLabels(ctx context.Context, ids []string) (map[string]map[string]string, error)
	DomainTrips(ctx context.Context, site string) ([]store.DomainTrip, error)
	RearmDomain(ctx context.Context, site, label, value string) (bool, error)
	// Pool: see store.Store.Pool (the session holding LockKey).
	Pool() *pgxpool.Pool
	// TakePolicyLead bumps the leadership epoch that fences the passes'
	// writes (store.WithPolicyFence); see store.Store.TakePolicyLead.
	TakePolicyLead(ctx context.Context, replica string) (int64, error)
}

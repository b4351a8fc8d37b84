package web

import "github.com/jackc/pgx/v5/pgxpool"

// Store is what the fleet view reads of the hub's database besides the
// fleet API (*store.Store implements it): the pool its own read-only
// queries (queries.go) run on.
type Store interface {
	// Pool: see store.Store.Pool.
	Pool() *pgxpool.Pool
}

package policyrun

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ironlink/ironlink/hub/store"
)

// Store is what the evaluator reads and records in the hub's database
// (*store.Store implements it): the policy's reads and writes, and the
// pool it takes the leader lock's connection from.
type Store interface {
	store.Policy
	// Pool: see store.Store.Pool (the session holding LockKey).
	Pool() *pgxpool.Pool
}

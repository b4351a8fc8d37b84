package store

import (
	"context"
	"time"

	"github.com/ironlink/ironlink/hub/store/partitions"
)

// The history partitions are kept by package partitions (a Keeper over
// Pool); these names stay for the hub's configuration.

// PartitionPolicy is partitions.Policy.
type PartitionPolicy = partitions.Policy

// Partition policy defaults: partitions.DefaultInterval and DefaultAhead.
const (
	DefaultPartitionInterval = partitions.DefaultInterval
	DefaultPartitionsAhead   = partitions.DefaultAhead
)

// HistoryHorizon returns the oldest time from which every history table
// still holds all its rows (partitions.Horizon): the zero time when
// retention has dropped nothing. Errors are database errors, wrapped.
func (s *Store) HistoryHorizon(ctx context.Context) (time.Time, error) {
	return partitions.Horizon(ctx, s.pool)
}

package web

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// deviceNames returns the names of the devices ids names (id → name; a
// device without a name, or unknown, is absent), for tables that list
// rows of several devices by id (the commands page). Errors: the query's.
func deviceNames(ctx context.Context, pool *pgxpool.Pool, ids []string) (map[string]string, error) {
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := pool.Query(ctx, `SELECT id::text, name FROM devices WHERE id = ANY($1::uuid[]) AND name <> ''`, ids)
	if err != nil {
		return nil, fmt.Errorf("device names: %w", err)
	}
	var id, name string
	if _, err := pgx.ForEachRow(rows, []any{&id, &name}, func() error {
		out[id] = name
		return nil
	}); err != nil {
		return nil, fmt.Errorf("device names: %w", err)
	}
	return out, nil
}

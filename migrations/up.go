package migrations

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/ironlink/ironlink/internal/pgprimary"
)

// Up applies every pending migration of this package with goose,
// holding a PostgreSQL advisory lock so replicas starting together migrate
// once. databaseURL may name several hosts; the primary among them is used
// (pgprimary.Configure). It returns the versions applied (empty when up to date).
func Up(ctx context.Context, databaseURL string) ([]int64, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	pgprimary.Configure(&cfg.ConnConfig.Config, databaseURL)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create pool: %w", err)
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, FS, goose.WithSessionLocker(locker))
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("apply migrations: %w", err)
	}
	var applied []int64
	for _, r := range res {
		applied = append(applied, r.Source.Version)
	}
	return applied, nil
}

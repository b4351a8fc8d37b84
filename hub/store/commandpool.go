package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The command path — an operator's quarantine or release
// (SetDesiredImpairment, RetryCommand), its delivery (DueCommands,
// MarkSent), the satellite's result (RecordResult) and the read that shows
// it (GetCommand) — has its own small pool once OpenCommandPool is called,
// so it never waits for a connection behind condition ingest, which can
// keep every connection of the main pool busy. Without it, the command path
// shares the main pool.

// OpenCommandPool opens the command path's own pool of at most maxConns
// connections (≥ 1) to the database Open connected to, with opts applied
// as for Open, and pings it. Call it once, before serving; Close closes it.
// Errors: maxConns < 1, a database that does not answer.
func (s *Store) OpenCommandPool(ctx context.Context, maxConns int32, opts ...Option) error {
	if maxConns < 1 {
		return fmt.Errorf("command pool size %d is below 1", maxConns)
	}
	cfg := s.pool.Config().Copy()
	cfg.MaxConns = maxConns
	cfg.MinConns = min(cfg.MinConns, maxConns)
	for _, o := range opts {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("create command pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return fmt.Errorf("connect command pool to PostgreSQL: %w", err)
	}
	s.cmdPool = pool
	return nil
}

// commandPool is the command path's pool: its own when OpenCommandPool
// opened one, else the main pool.
func (s *Store) commandPool() *pgxpool.Pool {
	if s.cmdPool != nil {
		return s.cmdPool
	}
	return s.pool
}

// CommandPool returns the command path's pool (the main pool unless
// OpenCommandPool opened one), for metrics and tests.
func (s *Store) CommandPool() *pgxpool.Pool { return s.commandPool() }

// inTxOn runs fn in a transaction on pool, retrying it (up to 3 attempts in
// all) when PostgreSQL aborts it as a deadlock victim (40P01) or a
// serialization failure (40001); fn must be safe to run again. With a
// policy fence in ctx (WithPolicyFence) the transaction checks it first.
func (s *Store) inTxOn(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := checkPolicyFence(ctx, tx); err != nil {
				return err
			}
			return fn(tx)
		})
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || (pgErr.Code != "40P01" && pgErr.Code != "40001") {
			return err
		}
		s.log.Warn("transaction aborted by PostgreSQL; retrying", "code", pgErr.Code, "attempt", attempt)
		time.Sleep(time.Duration(attempt*attempt) * 10 * time.Millisecond)
	}
	return err
}

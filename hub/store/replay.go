package store

import (
	"context"
	"fmt"
	"time"
)

// Remember implements auth.ReplayCache over PostgreSQL, shared by every hub
// replica: it records that client clientID used the assertion id jti (JWT
// "jti", RFC 7519 §4.1.7), valid for ttl from the database's now(), and
// reports replayed = true when the pair is already recorded and not yet
// expired (RFC 7523 §3 item 7). Expiry is stored, compared and purged on
// the database's clock only (the one every replica shares); the hub's
// clock only measured ttl.
//
// One statement, INSERT … ON CONFLICT: the primary key (client_id, jti)
// makes concurrent attempts on any number of replicas race safely — exactly
// one of them inserts. A row that is still present but already expired (not
// purged yet) is taken over instead of counting as a replay, since the token
// it stood for can no longer be presented.
//
// Errors are database errors, wrapped; the caller must then refuse the token.
func (s *Store) Remember(ctx context.Context, clientID, jti string, ttl time.Duration) (replayed bool, err error) {
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO jti_replay (client_id, jti, expires_at) VALUES ($1, $2, now() + $3 * interval '1 microsecond')
		ON CONFLICT (client_id, jti) DO UPDATE
			SET expires_at = EXCLUDED.expires_at, seen_at = now()
			WHERE jti_replay.expires_at <= now()`, clientID, jti, ttl.Microseconds())
	if err != nil {
		return false, fmt.Errorf("remember jti of client %s: %w", clientID, err)
	}
	return tag.RowsAffected() == 0, nil
}

// PurgeExpiredJTIs deletes the remembered assertion ids whose expiry has
// passed and returns how many it deleted.
func (s *Store) PurgeExpiredJTIs(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM jti_replay WHERE expires_at <= now()`)
	if err != nil {
		return 0, fmt.Errorf("purge expired jtis: %w", err)
	}
	return tag.RowsAffected(), nil
}

// RunJTIPurge calls PurgeExpiredJTIs every interval (default 1 minute when
// interval ≤ 0) until ctx ends, logging failures. Every replica may run it:
// the deletes are idempotent.
func (s *Store) RunJTIPurge(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = time.Minute
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := s.PurgeExpiredJTIs(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("purge expired jtis", "err", err)
				}
				continue
			}
			if n > 0 {
				s.log.Debug("purged expired jtis", "rows", n)
			}
		}
	}
}

package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// PolicyFenceKey is the PostgreSQL advisory lock that fences the policy
// evaluator's writes: each write transaction of a pass takes it shared
// (pg_advisory_xact_lock_shared) and a replica taking the lead takes it
// exclusive while it bumps policy_leader.epoch, so the bump waits for the
// previous leader's writes in flight and every later one sees the new
// epoch.
const PolicyFenceKey int64 = 0x69726f6e66656e // "ironfen"

// ErrPolicyFenced is the error of an evaluator write whose replica is no
// longer the leader: policy_leader.epoch moved past the one in its
// context (another replica took the lead, e.g. while this one was
// stopped). Nothing was written.
var ErrPolicyFenced = errors.New("policy evaluator fenced: another replica took the lead")

type policyFenceKey struct{}

// WithPolicyFence returns ctx carrying the evaluator's leadership epoch:
// every transaction the store runs with it (inTx) first takes
// PolicyFenceKey shared and fails with ErrPolicyFenced, writing nothing,
// when policy_leader.epoch is not epoch.
func WithPolicyFence(ctx context.Context, epoch int64) context.Context {
	return context.WithValue(ctx, policyFenceKey{}, epoch)
}

// checkPolicyFence is the fence of a transaction whose ctx carries one
// (WithPolicyFence); nil without one.
func checkPolicyFence(ctx context.Context, tx pgx.Tx) error {
	epoch, ok := ctx.Value(policyFenceKey{}).(int64)
	if !ok {
		return nil
	}
	var now int64
	if err := tx.QueryRow(ctx, `SELECT pg_advisory_xact_lock_shared($1), (SELECT epoch FROM policy_leader WHERE id = 1)`,
		PolicyFenceKey).Scan(nil, &now); err != nil {
		return fmt.Errorf("policy fence: %w", err)
	}
	if now != epoch {
		return fmt.Errorf("%w (epoch %d, this replica's %d)", ErrPolicyFenced, now, epoch)
	}
	return nil
}

// TakePolicyLead records replica as the policy evaluator's leader: under
// PolicyFenceKey exclusive (waiting for the writes of the previous leader
// still in flight to commit or be ended) it bumps policy_leader.epoch and
// returns it, the epoch to pass to WithPolicyFence. Call it holding the
// evaluator's lock (hub/policyrun).
func (s *Store) TakePolicyLead(ctx context.Context, replica string) (int64, error) {
	var epoch int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, PolicyFenceKey); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `UPDATE policy_leader SET epoch = epoch + 1, holder = $1, since = now() WHERE id = 1 RETURNING epoch`,
			replica).Scan(&epoch)
	})
	if err != nil {
		return 0, fmt.Errorf("take policy lead: %w", err)
	}
	return epoch, nil
}

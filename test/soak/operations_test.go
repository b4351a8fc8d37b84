//go:build soak

package soak

import (
	"context"
	"fmt"
)

// invOperations is the checker's invariant on operations
// (docs/howto/soak.md).
const invOperations = "operations reach a final state"

// operationsFinish checks, reading the operations table, that no operation
// stays PENDING or RUNNING for longer than commandGrace and, final, that
// every one is SUCCEEDED, FAILED or CANCELLED.
//
// It does not count an operation's power requests: under the simulator's
// churn (which flips power states too) a REBOOT may rightly ask again for
// a state the churn took away (up to 3 times a half,
// satellite/operations/nodeactions.go). That a redelivery after a fault
// resumes rather than repeats is checked where nothing else moves the
// node: test/faults TestPostgresFailover and test/e2e TestNodeActionsKill*.
func (c *checker) operationsFinish(ctx context.Context, final bool) error {
	rows, err := c.pool.Query(ctx, `
		SELECT id::text, kind, state, last_error, now() - created_at > $1::interval
		FROM operations`, c.commandGrace.String())
	if err != nil {
		return fmt.Errorf("operations: %w", err)
	}
	defer rows.Close()
	var bad []string
	n := 0
	for rows.Next() {
		var id, kind, state, lastErr string
		var old bool
		if err := rows.Scan(&id, &kind, &state, &lastErr, &old); err != nil {
			return fmt.Errorf("operations: %w", err)
		}
		n++
		open := state == "PENDING" || state == "RUNNING"
		switch {
		case final && open:
			bad = append(bad, fmt.Sprintf("operation %s (%s) ended the soak %s (last error %q)", id, kind, state, lastErr))
		case !final && open && old:
			bad = append(bad, fmt.Sprintf("operation %s (%s) still %s after %s", id, kind, state, c.commandGrace))
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("operations: %w", err)
	}
	c.record(invOperations, n, c.newOnly(invOperations, bad)...)
	return nil
}

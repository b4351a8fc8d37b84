package store

import "github.com/jackc/pgx/v5"

// Row shapes shared with package feed, which reads rows of these tables
// between its own leading (xid, id, time) and trailing columns.
const (
	// OperationColumns are the operations columns ScanOperation reads.
	OperationColumns = operationColumns
	// DecisionColumns are the policy_decisions columns ScanDecision reads.
	DecisionColumns = decisionColumns
	// PendingColumns are the policy_pending_actions columns (p, with its
	// device d and decision pd joined) ScanPending reads.
	PendingColumns = pendingColumns
)

// ScanOperation scans a row of OperationColumns.
func ScanOperation(r pgx.Row) (Operation, error) { return scanOperation(r) }

// ScanDecision scans a row of DecisionColumns.
func ScanDecision(r pgx.Row) (PolicyDecision, error) { return scanDecision(r) }

// ScanPending scans a row of PendingColumns.
func ScanPending(r pgx.Row) (PendingAction, error) { return scanPending(r) }

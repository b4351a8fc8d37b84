// Package partitions keeps the hub's range-partitioned history tables
// (condition_history and status_history, partitioned by the hub's time of
// recording since migration 00011): a Keeper splits partitions of
// Policy.Interval off each table's catch-all tail ahead of time, moving
// any rows already there, and drops whole partitions once retention has
// expired them, one replica at a time under an advisory lock. List and
// Horizon read the layout (Horizon: the oldest instant the history still
// covers, which hub/store's as_of reads check).
package partitions

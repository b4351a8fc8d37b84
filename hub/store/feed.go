package store

// FeedNotifyChannel is the LISTEN/NOTIFY channel on which feed sources
// announce new rows (the triggers of command_events, operation_events,
// policy_decisions and policy_pending_events do; status changes do not,
// to keep ingest free of it: watchers poll for those). A hint only. The
// feed itself is package feed.
const FeedNotifyChannel = "ironlink_feed"

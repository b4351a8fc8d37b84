// Package link is the satellite end of the satellite ↔ hub link
// (ironlink.v1.LinkService/Connect). Client keeps one stream open to the hub,
// reconnecting with exponential backoff and full jitter; on every new link it
// sends a Hello, numbers a full snapshot after the hub's last committed
// sequence, then streams deltas from its Outbox, drops batches once acked,
// hands commands to a CommandHandler and sends their results back.
package link

// Package notify is a replica's one PostgreSQL LISTEN connection: a
// Dispatcher LISTENs on a fixed set of channels over one dedicated
// connection, in one loop, and fans each notification out to the
// subscribers of its channel. It reconnects (and LISTENs again on every
// channel) after a second when the connection drops.
//
// Every notification the hub sends is a hint (the command sweep, the
// operation watches' poll and the feed watchers' poll are the guarantees),
// so a subscriber that falls behind loses notifications rather than
// holding up the others: each subscriber has its own queue (QueueLen
// payloads) and goroutine, and a full queue drops the new payload.
//
// The hub's store owns one Dispatcher (store.Store.Notifications) listening
// on the command, operation and feed channels; the loop runs while at least
// one subscriber is subscribed.
package notify

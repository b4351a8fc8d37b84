// Package link serves the hub end of the satellite link
// (ironlink.v1.LinkService/Connect). One goroutine owns each stream and
// alone sends on it; it never waits on the database: the writes and reads a
// link needs run on two ordered, bounded worker queues and hand back what to
// send. It commits condition batches before acking them, delivers the site's
// due commands (woken by LISTEN/NOTIFY, guaranteed by a periodic sweep),
// records command results and drift corrections, replaces the site's site
// conditions (SiteConditions, under the link's fencing epoch) and keeps the
// site's liveness. Every id a message names must belong to the link's site.
//
// Files by job:
//   - server.go: Config, Server and Connect, which reads as the protocol
//     (hello → resume point → desired states → the loop);
//   - registry.go: the links open on this replica (supersede, drain, revoke,
//     wake);
//   - loop.go: the per-link loop, the only sender, and its task queues;
//   - tasks.go: the database work of each message kind, run off the loop;
//   - convert.go: validation and conversion of link messages to store
//     types, limits, clock-skew clamps;
//   - wake.go: LISTEN/NOTIFY command wake-ups and the stale-site sweep.
//
// It must not import satellite/ or hub/fleet.
package link

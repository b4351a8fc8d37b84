// Package link serves the hub end of the satellite link
// (ironlink.v1.LinkService/Connect): one goroutine owns each stream and alone
// sends on it; it commits condition batches before acking them, delivers the
// site's due commands (woken by LISTEN/NOTIFY, guaranteed by a periodic
// sweep), records command results, replaces the site's site conditions
// (SiteConditions, under the link's fencing epoch) and keeps the site's
// liveness.
package link

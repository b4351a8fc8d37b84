package link

import "sync/atomic"

// Fair shares of the write path (issue 27 deliverable 3). Every link of a
// replica hands its condition batches and site-condition sets to the one
// group committer of the replica's store. Without a share, a link that
// sends far more than the others (a resync storm, a satellite bug) keeps
// MaxPendingCommits+1 large writes in the committer at all times, and the
// other sites' small deltas queue behind them and commit in its large
// groups. With it, a link may start a write only while its device updates
// in the committer stay within its share of FairWriteBudget — the budget
// divided by the links that have writes in the committer now — or when it
// has none there (a write is never held forever, whatever its size). A
// link over its share keeps its writes waiting in its own queue; once that
// queue is full the link stops reading its stream and gRPC flow control
// holds that satellite alone (back-pressure on that link only).

// FairWriteBudget is the device updates in a replica's group committer that
// the links with writes there share equally: alone, a link keeps up to
// four 500-device snapshot parts in flight; beside others, a link sending
// large batches keeps one, and the committer's other worker stays free for
// the other sites' writes.
const FairWriteBudget = 2000

// writeShares is a replica's count of the links with writes in its group
// committer. Its zero value is ready.
type writeShares struct {
	active atomic.Int64
}

// share returns the device updates a link may have in the committer now.
func (w *writeShares) share() int {
	return FairWriteBudget / int(max(w.active.Load(), 1))
}

// linkShare is one link's writes in the committer, owned by the link's
// loop: the device updates of each write started and not yet taken back,
// in order (a pipelined queue hands outcomes back in order).
type linkShare struct {
	shares   *writeShares
	inflight []int
	devices  int
}

// admit reports whether a write of n device updates may start now: when
// the link has none in the committer, or when its share has room for it.
func (ls *linkShare) admit(n int) bool {
	return ls.devices == 0 || ls.devices+n <= ls.shares.share()
}

// started records a write of n device updates handed to the committer.
func (ls *linkShare) started(n int) {
	if len(ls.inflight) == 0 {
		ls.shares.active.Add(1)
	}
	ls.inflight = append(ls.inflight, n)
	ls.devices += n
}

// finished records that the oldest write started is done.
func (ls *linkShare) finished() {
	if len(ls.inflight) == 0 {
		return
	}
	ls.devices -= ls.inflight[0]
	ls.inflight = ls.inflight[1:]
	if len(ls.inflight) == 0 {
		ls.shares.active.Add(-1)
	}
}

// release forgets every write still counted (the link ended: their
// outcomes will not be taken).
func (ls *linkShare) release() {
	if len(ls.inflight) > 0 {
		ls.shares.active.Add(-1)
	}
	ls.inflight, ls.devices = nil, 0
}

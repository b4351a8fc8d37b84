package link

import (
	"crypto/rand"
	"encoding/hex"
	"sync"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// SnapshotFunc returns every live device of the site with all its conditions,
// or ok=false when no complete listing has been made yet.
type SnapshotFunc func() (devices []*ironlinkv1.DeviceUpdate, ok bool)

// Outbox holds the satellite's unacknowledged batches in sequence order. It is
// bounded: when more than MaxBatches are waiting, it drops them and asks for a
// fresh snapshot instead (the snapshot carries the latest state per device, so
// nothing is lost). Safe for concurrent use.
type Outbox struct {
	// MaxBatches bounds the unacked batches kept (default 256).
	MaxBatches int
	// MaxDevicesPerBatch splits large pushes and snapshots (default 500; the hub refuses >1000).
	MaxDevicesPerBatch int

	mu           sync.Mutex
	next         uint64 // sequence of the next batch
	queue        []*ironlinkv1.ConditionBatch
	sent         int // queue[:sent] have been sent on the current link
	needSnapshot bool
	wake         chan struct{}
}

// NewOutbox returns an empty outbox that needs a snapshot first.
func NewOutbox() *Outbox {
	return &Outbox{MaxBatches: 256, MaxDevicesPerBatch: 500, next: 1, needSnapshot: true, wake: make(chan struct{}, 1)}
}

// Wake is signalled whenever something new can be sent.
func (o *Outbox) Wake() <-chan struct{} { return o.wake }

func (o *Outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Push queues device changes as one or more delta batches. Deltas pushed
// while a snapshot is pending are dropped (the snapshot will carry them), but
// the push still wakes the sender: the snapshot may be buildable now. Call
// Push after every complete listing, even with no changes.
func (o *Outbox) Push(devices []*ironlinkv1.DeviceUpdate) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.needSnapshot {
		o.signal()
		return
	}
	if len(devices) == 0 {
		return
	}
	for len(devices) > 0 {
		n := min(len(devices), o.MaxDevicesPerBatch)
		o.queue = append(o.queue, &ironlinkv1.ConditionBatch{Sequence: o.next, Devices: devices[:n]})
		o.next++
		devices = devices[n:]
	}
	if len(o.queue) > o.MaxBatches {
		o.queue, o.sent, o.needSnapshot = nil, 0, true
	}
	o.signal()
}

// RequestSnapshot drops every queued batch and makes the next Take build a snapshot.
func (o *Outbox) RequestSnapshot() {
	o.mu.Lock()
	o.queue, o.sent, o.needSnapshot = nil, 0, true
	o.mu.Unlock()
	o.signal()
}

// Restart prepares for a new link whose hub has committed up to
// lastCommitted. Batches the hub already has are dropped; the rest are sent
// again, in order, so the hub gets exactly what it is missing. When the
// queue cannot fill the gap (the hub is behind what this process still
// holds, or ahead of its numbering because another process of the site
// numbered further), numbering continues after lastCommitted and a full
// snapshot is sent instead. A fresh Outbox (new process, new boot id)
// always starts with a snapshot.
//
// ours says whether lastCommitted was committed by this process (the hub's
// last_committed_boot_id is this boot id); when it was not, this process's
// queue cannot be trusted to fill the gap and a snapshot is sent.
func (o *Outbox) Restart(lastCommitted uint64, ours bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	defer o.signal()
	i := 0
	for i < len(o.queue) && o.queue[i].GetSequence() <= lastCommitted {
		i++
	}
	o.queue, o.sent = o.queue[i:], 0
	resumable := !o.needSnapshot && ours &&
		((len(o.queue) > 0 && o.queue[0].GetSequence() == lastCommitted+1) ||
			(len(o.queue) == 0 && o.next == lastCommitted+1))
	if resumable {
		return
	}
	o.next = max(o.next, lastCommitted+1)
	o.queue, o.needSnapshot = nil, true
}

// Take returns the batches to send now, in order, and marks them sent. When a
// snapshot is needed and snap can produce one, it is built first; when snap
// cannot yet (no complete listing), Take returns nothing.
func (o *Outbox) Take(snap SnapshotFunc) []*ironlinkv1.ConditionBatch {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.needSnapshot {
		devices, ok := snap()
		if !ok {
			return nil
		}
		o.needSnapshot = false
		id := newID()
		for first := true; first || len(devices) > 0; first = false {
			n := min(len(devices), o.MaxDevicesPerBatch)
			o.queue = append(o.queue, &ironlinkv1.ConditionBatch{Sequence: o.next,
				Snapshot: &ironlinkv1.SnapshotPart{SnapshotId: id, Final: n == len(devices)}, Devices: devices[:n]})
			o.next++
			devices = devices[n:]
		}
	}
	out := o.queue[o.sent:]
	o.sent = len(o.queue)
	return out
}

// Ack drops every queued batch with a sequence ≤ seq.
func (o *Outbox) Ack(seq uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := 0
	for i < len(o.queue) && o.queue[i].GetSequence() <= seq {
		i++
	}
	// Nil the acked slots: the reslice keeps the backing array, and with
	// it a whole snapshot (tens of MiB at 10,000 devices) until it regrows.
	clear(o.queue[:i])
	o.queue = o.queue[i:]
	o.sent = max(o.sent-i, 0)
}

// SnapshotDue reports whether a snapshot must go before anything else
// (a new link that cannot resume, or a dropped backlog) and Take has not
// built it yet: its SnapshotFunc could not (no complete listing, or the
// first snapshot waits for the hub's desired states).
func (o *Outbox) SnapshotDue() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.needSnapshot
}

// Pending returns the number of unacked batches and the highest sequence sent.
func (o *Outbox) Pending() (batches int, lastSequence uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.queue), o.next - 1
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

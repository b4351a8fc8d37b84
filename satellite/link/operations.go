package link

import (
	"sync"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// OperationHandler receives the hub's OperationRequests (ConnectResponse.
// operation; satellites that announced the "operations" capability).
// HandleOperation must return at once; the handler reports progress with
// [Client.SendOperationProgress].
type OperationHandler interface {
	HandleOperation(req *ironlinkv1.OperationRequest)
}

// progressQueue holds the operation progress not yet written to a link,
// newest per operation: every OperationProgress carries the whole step list,
// so a newer one replaces an older one still waiting (the hub replaces its
// stored steps too). An entry leaves the queue only when a send succeeded;
// a failed send puts it back unless a newer one arrived. Together with the
// hub's redelivery of operations without a final progress this gives
// at-least-once delivery of the final state.
type progressQueue struct {
	mu    sync.Mutex
	order []string
	byID  map[string]*ironlinkv1.OperationProgress
	wake  chan struct{}
}

func newProgressQueue() *progressQueue {
	return &progressQueue{byID: map[string]*ironlinkv1.OperationProgress{}, wake: make(chan struct{}, 1)}
}

func (q *progressQueue) put(p *ironlinkv1.OperationProgress) {
	q.mu.Lock()
	id := p.GetOperationId()
	if _, ok := q.byID[id]; !ok {
		q.order = append(q.order, id)
	}
	q.byID[id] = p
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take removes and returns the oldest entry, or nil.
func (q *progressQueue) take() *ironlinkv1.OperationProgress {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.order) == 0 {
		return nil
	}
	id := q.order[0]
	q.order = q.order[1:]
	p := q.byID[id]
	delete(q.byID, id)
	return p
}

// putBack re-queues p at the front after a failed send, unless a newer
// progress of the operation is already waiting.
func (q *progressQueue) putBack(p *ironlinkv1.OperationProgress) {
	q.mu.Lock()
	defer q.mu.Unlock()
	id := p.GetOperationId()
	if _, ok := q.byID[id]; ok {
		return
	}
	q.byID[id] = p
	q.order = append([]string{id}, q.order...)
}

// SendOperationProgress queues p for the current or next link; it never
// blocks. A newer progress of the same operation replaces one still queued.
func (c *Client) SendOperationProgress(p *ironlinkv1.OperationProgress) { c.progress.put(p) }

// Rehello ends the current link so the next one sends a fresh Hello (the
// capabilities changed, for example the operations credential now works).
func (c *Client) Rehello() {
	select {
	case c.rehello <- struct{}{}:
	default:
	}
}

// flushProgress writes every queued progress to stream.
func (c *Client) flushProgress(send func(*ironlinkv1.ConnectRequest) error) error {
	for {
		p := c.progress.take()
		if p == nil {
			return nil
		}
		if err := send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_OperationProgress{OperationProgress: p}}); err != nil {
			c.progress.putBack(p)
			return err
		}
		c.log.Debug("operation progress sent", "operation_id", p.GetOperationId(), "attempt", p.GetAttempt(), "state", p.GetState().String())
	}
}

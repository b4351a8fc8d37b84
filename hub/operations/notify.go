package operations

import (
	"context"
	"sync"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/pglisten"
)

// Notifier fans operation change notifications out to WatchOperation
// streams of this replica. Safe for concurrent use.
type Notifier struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

// NewNotifier returns a notifier without subscribers.
func NewNotifier() *Notifier { return &Notifier{subs: map[string]map[chan struct{}]struct{}{}} }

// Subscribe returns a channel woken (coalesced, never blocking the
// notifier) when operation id changes, and the func that unsubscribes.
func (n *Notifier) Subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	if n.subs[id] == nil {
		n.subs[id] = map[chan struct{}]struct{}{}
	}
	n.subs[id][ch] = struct{}{}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.subs[id], ch)
		if len(n.subs[id]) == 0 {
			delete(n.subs, id)
		}
		n.mu.Unlock()
	}
}

// Notify wakes the subscribers of operation id.
func (n *Notifier) Notify(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.subs[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Listen LISTENs on store.OperationsChannel over a dedicated connection to
// databaseURL (reconnecting after a second) and calls Notify for each
// notification until ctx ends. Notifications are hints; watches poll too.
func (n *Notifier) Listen(ctx context.Context, databaseURL string, logErr func(error)) error {
	return pglisten.Run(ctx, databaseURL, store.OperationsChannel, n.Notify, logErr)
}

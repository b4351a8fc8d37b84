package link

import "github.com/ironlink/ironlink/hub/store"

// Store is what the link service reads and writes of the hub's database
// (*store.Store implements it): the ingest write path, the link's side of
// commands and of operations, and the replica's LISTEN dispatcher.
type Store interface {
	store.Ingest
	store.LinkCommands
	store.LinkOperations
	store.Notifier
}

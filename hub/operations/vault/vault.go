// Package vault keeps the BMC credentials of ENROL operations (NodeSpec
// driver_info values) until the satellite has created the node, never in
// logs and never in clear in PostgreSQL (SPEC "Operations", issue 13). It
// has two modes:
//
// Sealed (a [Sealer], from the hub's --enrol-key-file, the same key on
// every replica): the values are stored AES-256-GCM-sealed in the
// operation row (sealed_driver_info), any replica holding the site's link
// opens them, and a restart or failover before delivery loses nothing. The
// database drops the sealed value as soon as the node exists (device_id
// set) or the operation ends. This is the mode for several replicas.
//
// Memory (no key; one replica, the demo): the values live in the memory of
// the replica process that took the request. The operation row names
// its holder (Holder: replica name and a per-process id). The link that
// delivers the operation reads the values from this process's vault; a link
// on another replica leaves the operation PENDING for the holder until
// TTL after its creation. When the holder process is gone (restarted:
// same replica name, another process id; or the TTL passed) before the
// node was created, the delivering link ends the ENROL FAILED with
// "CredentialsUnavailable" and the operator starts it again. Once the
// satellite reported the node's UUID, a redelivery carries no driver_info:
// the satellite takes the existing node over by name.
package vault

import (
	"maps"
	"sync"
	"time"

	"github.com/google/uuid"
)

// DefaultTTL is how long credentials are kept when New is given none.
const DefaultTTL = 15 * time.Minute

// MaxEntries bounds the vault; Put refuses more (bounded memory).
const MaxEntries = 10000

// Vault maps operation ids to driver_info. Safe for concurrent use; the
// zero value is not usable, call New.
type Vault struct {
	holder string
	ttl    time.Duration
	now    func() time.Time

	sealer *Sealer

	mu      sync.Mutex
	entries map[string]entry
}

// WithSealer switches v to sealed mode (see the package doc) and returns
// it; call it before v is used.
func (v *Vault) WithSealer(s *Sealer) *Vault {
	v.sealer = s
	return v
}

// Sealer returns the sealer of sealed mode, nil in memory mode.
func (v *Vault) Sealer() *Sealer { return v.sealer }

type entry struct {
	info    map[string]string
	expires time.Time
}

// New returns an empty vault for replica, with entries kept for ttl
// (DefaultTTL when ttl <= 0).
func New(replica string, ttl time.Duration) *Vault {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Vault{holder: replica + "/" + uuid.NewString(), ttl: ttl, now: time.Now, entries: map[string]entry{}}
}

// Holder names this process: "<replica>/<process uuid>".
func (v *Vault) Holder() string { return v.holder }

// TTL is how long an entry is kept after Put.
func (v *Vault) TTL() time.Duration { return v.ttl }

// Put keeps a copy of info for operation id; false when the vault is full.
func (v *Vault) Put(id string, info map[string]string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.expireLocked()
	if len(v.entries) >= MaxEntries {
		return false
	}
	v.entries[id] = entry{info: maps.Clone(info), expires: v.now().Add(v.ttl)}
	return true
}

// Room reports whether n more entries fit.
func (v *Vault) Room(n int) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.expireLocked()
	return len(v.entries)+n <= MaxEntries
}

// Get returns a copy of operation id's driver_info; ok=false when this
// process does not hold it (another replica, a restart, expired, dropped).
func (v *Vault) Get(id string) (map[string]string, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.entries[id]
	if !ok || v.now().After(e.expires) {
		return nil, false
	}
	return maps.Clone(e.info), true
}

// Drop forgets operation id (it finished).
func (v *Vault) Drop(id string) {
	v.mu.Lock()
	delete(v.entries, id)
	v.mu.Unlock()
}

// Len returns the number of entries held.
func (v *Vault) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.entries)
}

func (v *Vault) expireLocked() {
	now := v.now()
	for id, e := range v.entries {
		if now.After(e.expires) {
			delete(v.entries, id)
		}
	}
}

// SameReplica reports whether holder (another process's Holder) names the
// same replica as this process: then that process is gone, since this one
// replaced it.
func (v *Vault) SameReplica(holder string) bool {
	return replicaOf(holder) == replicaOf(v.holder)
}

func replicaOf(holder string) string {
	for i := len(holder) - 1; i >= 0; i-- {
		if holder[i] == '/' {
			return holder[:i]
		}
	}
	return holder
}

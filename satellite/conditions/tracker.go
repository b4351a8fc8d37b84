package conditions

import (
	"slices"
	"sync"
	"time"

	"github.com/ironlink/ironlink/internal/condition"
)

// Tracker keeps the last conditions of each device and tells which ones
// changed. The zero value is ready to use; it is safe for concurrent use.
type Tracker struct {
	mu sync.Mutex
	// devices holds, per device, one slot per condition.Types entry (in
	// that order): one allocation per device instead of a map of seven
	// (issue 11: a 10,000-node site keeps 70,000 conditions).
	devices map[string][]slot
}

// slot is one condition of a device; set is false until it is observed.
type slot struct {
	c   condition.Condition
	set bool
}

// typeIndex is t's position in condition.Types, or -1 for an unknown type.
func typeIndex(t condition.Type) int {
	for i, k := range condition.Types {
		if k == t {
			return i
		}
	}
	return -1
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker { return &Tracker{} }

// Observe records conds (typically Map's output) for deviceID and returns
// the conditions whose status, reason, message or observed generation
// differ from the last ones recorded (all of them on a device's first
// observation), in the order given; nil when nothing changed.
//
// LastTransitionTime follows KEP-1623: while a condition's status stays the
// same, the recorded LastTransitionTime is kept (a changed reason or
// message does not move it); when the status changes, the time proposed in
// the condition (Map proposes provision_updated_at for provision-driven
// changes, else the poll time) is used, but never earlier than the previous
// transition — a condition never moves backwards in time. A zero proposed
// time becomes ObservedTime (or now). Conditions of an unknown type are
// ignored.
func (t *Tracker) Observe(deviceID string, conds []condition.Condition) (changed []condition.Condition) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.devices == nil {
		t.devices = map[string][]slot{}
	}
	m := t.devices[deviceID]
	if m == nil {
		m = make([]slot, len(condition.Types))
		t.devices[deviceID] = m
	}
	next := 0 // conds usually come in condition.Types order (Map's)
	for _, c := range conds {
		i := -1
		if next < len(condition.Types) && condition.Types[next] == c.Type {
			i = next
		} else if i = typeIndex(c.Type); i < 0 {
			continue
		}
		next = i + 1
		if c.ObservedTime.IsZero() {
			c.ObservedTime = time.Now().UTC()
		}
		if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = c.ObservedTime
		}
		prev, seen := m[i].c, m[i].set
		if seen {
			if prev.Status == c.Status {
				c.LastTransitionTime = prev.LastTransitionTime
			} else if c.LastTransitionTime.Before(prev.LastTransitionTime) {
				c.LastTransitionTime = prev.LastTransitionTime
				if c.ObservedTime.After(c.LastTransitionTime) {
					c.LastTransitionTime = c.ObservedTime
				}
			}
		}
		if !seen || !prev.SameObservation(c) {
			changed = append(changed, c)
		}
		m[i] = slot{c: c, set: true}
	}
	return changed
}

// All returns the last conditions recorded for deviceID in condition.Types
// order (nil for an unknown device). The slice is a copy.
func (t *Tracker) All(deviceID string) []condition.Condition {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.devices[deviceID]
	if m == nil {
		return nil
	}
	out := make([]condition.Condition, 0, len(m))
	for _, sl := range m {
		if sl.set {
			out = append(out, sl.c)
		}
	}
	return out
}

// Get returns the last condition of type ct recorded for deviceID, and
// whether there is one.
func (t *Tracker) Get(deviceID string, ct condition.Type) (condition.Condition, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, i := t.devices[deviceID], typeIndex(ct)
	if m == nil || i < 0 || !m[i].set {
		return condition.Condition{}, false
	}
	return m[i].c, true
}

// Forget drops everything recorded for deviceID (e.g. after the hub was
// told the device was removed); a later Observe starts afresh.
func (t *Tracker) Forget(deviceID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.devices, deviceID)
}

// Devices returns the tracked device ids, sorted.
func (t *Tracker) Devices() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.devices))
	for id := range t.devices {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

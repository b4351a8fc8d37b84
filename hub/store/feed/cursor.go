package feed

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
)

// Kind names a kind of feed event.
type Kind string

// Feed event kinds (see proto FleetEventKind).
const (
	// EventDeviceStatus: a status history entry.
	EventDeviceStatus Kind = "DEVICE_STATUS"
	// EventCommandState: a command was created, changed state or was sent again.
	EventCommandState Kind = "COMMAND_STATE"
)

// Cursor is a position in the feed: after every event whose
// (XID, Source, ID) sorts at or before it. The zero cursor is before the
// oldest event.
type Cursor struct {
	// XID is the writing transaction's id (xid8).
	XID uint64
	// Source is the feed source's number (feedSources).
	Source int
	// ID is the row's id within its source.
	ID int64
}

// String renders c as "XID.SOURCE.ID" (ParseCursor reads it back).
func (c Cursor) String() string {
	return fmt.Sprintf("%d.%d.%d", c.XID, c.Source, c.ID)
}

// Less reports whether c sorts before o.
func (c Cursor) Less(o Cursor) bool {
	if c.XID != o.XID {
		return c.XID < o.XID
	}
	if c.Source != o.Source {
		return c.Source < o.Source
	}
	return c.ID < o.ID
}

// ParseCursor reads a cursor written by Cursor.String. Errors: a
// malformed cursor (not three non-negative decimal numbers).
func ParseCursor(s string) (Cursor, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Cursor{}, fmt.Errorf("cursor %q is not XID.SOURCE.ID", s)
	}
	x, err1 := strconv.ParseUint(parts[0], 10, 64)
	src, err2 := strconv.ParseUint(parts[1], 10, 16)
	id, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || id < 0 {
		return Cursor{}, fmt.Errorf("cursor %q is not XID.SOURCE.ID", s)
	}
	return Cursor{XID: x, Source: int(src), ID: id}, nil
}

// Filter selects feed events.
type Filter struct {
	// Site, when non-empty, keeps events of that site.
	Site string
	// Sites, when non-nil, keeps only events of these sites (an operator
	// bound to sites); an empty non-nil slice keeps none.
	Sites []string
	// Statuses, when non-empty, keeps status events into or out of one of
	// them; other kinds are not filtered by status.
	Statuses []status.Status
	// Kinds, when non-empty, keeps only these kinds.
	Kinds []Kind
}

// StatusEvent is a device status change.
type StatusEvent struct {
	DeviceID, Site, Name string
	Status               status.Status
	Reason               string
	// Previous is the status before ("" for the device's first one).
	Previous status.Status
}

// CommandEvent is a command as it was right after one of its changes.
type CommandEvent struct {
	// Command has the state, attempts, errors and times of that moment.
	Command store.Command
	// Previous is the state before ("" when the command was created).
	Previous store.CommandState
	// DeviceName is the name of the command's device.
	DeviceName string
}

// Event is one event of the feed.
type Event struct {
	// Cursor is the event's position: resuming from it continues after it.
	Cursor Cursor
	Kind   Kind
	// At is when the change was recorded.
	At time.Time
	// Status is set for EventDeviceStatus, Command for EventCommandState,
	// Operation for EventOperationState, Decision for EventPolicyDecision,
	// Pending for EventPendingAction (sources.go).
	Status    *StatusEvent
	Command   *CommandEvent
	Operation *OperationEvent
	Decision  *PolicyDecisionEvent
	Pending   *PendingActionEvent
}

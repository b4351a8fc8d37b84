package feed

import (
	"fmt"
	"math"
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

// CursorError is a cursor ParseCursor refuses: Field names the part
// ("XID", "SOURCE" or "ID"; "" for the whole cursor) and Msg says what is
// wrong with it, without echoing the input.
type CursorError struct {
	Field, Msg string
}

func (e *CursorError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return "field " + e.Field + ": " + e.Msg
}

// ParseCursor reads a cursor written by Cursor.String, checking every field:
// XID, SOURCE and ID are decimal numbers without sign or leading zeros;
// SOURCE is 0 (a position between transactions, with ID 0) or the number
// of a feed source (1-7, feedSources), with an ID of at least 1 (row ids
// start at 1). Errors (*CursorError): anything else, naming the field.
func ParseCursor(s string) (Cursor, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Cursor{}, &CursorError{Msg: fmt.Sprintf("not XID.SOURCE.ID (%d dot-separated fields, want 3)", len(parts))}
	}
	var n [3]uint64
	for i, name := range []string{"XID", "SOURCE", "ID"} {
		p := parts[i]
		v, err := strconv.ParseUint(p, 10, 64)
		switch {
		case p == "":
			return Cursor{}, &CursorError{Field: name, Msg: "empty"}
		case err != nil:
			return Cursor{}, &CursorError{Field: name, Msg: "not a decimal number of at most 20 digits"}
		case len(p) > 1 && p[0] == '0':
			return Cursor{}, &CursorError{Field: name, Msg: "has a leading zero (pass the cursor unchanged)"}
		}
		n[i] = v
	}
	c := Cursor{XID: n[0]}
	if n[2] > math.MaxInt64 {
		return Cursor{}, &CursorError{Field: "ID", Msg: "beyond the largest row id (2^63-1)"}
	}
	c.ID = int64(n[2])
	switch {
	case n[1] == 0 && c.ID != 0:
		return Cursor{}, &CursorError{Field: "ID", Msg: "must be 0 with SOURCE 0 (a position between transactions)"}
	case n[1] == 0:
		return c, nil
	case !knownSource(n[1]):
		return Cursor{}, &CursorError{Field: "SOURCE", Msg: fmt.Sprintf("%d is not a feed source (0, or 1-%d)", n[1], maxSource())}
	case c.ID == 0:
		return Cursor{}, &CursorError{Field: "ID", Msg: "0 is not a row id (they start at 1)"}
	}
	c.Source = int(n[1])
	return c, nil
}

// knownSource reports whether no is the number of one of feedSources.
func knownSource(no uint64) bool {
	for _, s := range feedSources {
		if uint64(s.no) == no {
			return true
		}
	}
	return false
}

// maxSource is the highest source number of feedSources.
func maxSource() int {
	m := 0
	for _, s := range feedSources {
		m = max(m, s.no)
	}
	return m
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
	// Remediation is set for EventRemediation (remediation.go).
	Remediation *RemediationEvent
	// Validation is set for EventValidation (validation.go).
	Validation *ValidationEvent
}

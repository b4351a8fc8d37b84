package store

import (
	"time"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/internal/condition"
)

// Impairment is a device's desired customer-readiness gate as stored:
// "NONE" (never touched), "QUARANTINED" or "RELEASED".
type Impairment string

// Desired impairment states.
const (
	ImpairmentNone        Impairment = "NONE"
	ImpairmentQuarantined Impairment = "QUARANTINED"
	ImpairmentReleased    Impairment = "RELEASED"
)

// CommandState is a command's life-cycle state as stored.
type CommandState string

// Command states (see proto CommandState).
const (
	CommandPending    CommandState = "PENDING"
	CommandSent       CommandState = "SENT"
	CommandSucceeded  CommandState = "SUCCEEDED"
	CommandFailed     CommandState = "FAILED"
	CommandSuperseded CommandState = "SUPERSEDED"
)

// Facts are the Ironic fields a device's conditions came from (stored as JSON).
type Facts struct {
	Name           string `json:"name,omitempty"`
	ProvisionState string `json:"provision_state,omitempty"`
	PowerState     string `json:"power_state,omitempty"`
	Maintenance    bool   `json:"maintenance,omitempty"`
	ResourceClass  string `json:"resource_class,omitempty"`
	InstanceUUID   string `json:"instance_uuid,omitempty"`
	Lessee         string `json:"lessee,omitempty"`
	Owner          string `json:"owner,omitempty"`
	ConductorGroup string `json:"conductor_group,omitempty"`
	Fault          string `json:"fault,omitempty"`
}

// LinkHello is what a satellite says when its link opens.
type LinkHello struct {
	Site         string
	BootID       string
	Version      string
	Capabilities []string
	// Replica is the hub replica taking the link.
	Replica string
}

// LinkSession is the hub's answer to a hello.
type LinkSession struct {
	// Epoch fences the link: writes carrying an older epoch are refused.
	Epoch int64
	// LastSequence is the highest batch sequence committed for the site.
	LastSequence uint64
	// LastSequenceBootID is the boot id of the satellite process that
	// committed LastSequence ("" when none did).
	LastSequenceBootID string
}

// DeviceUpdate is one device's change in a batch.
type DeviceUpdate struct {
	// DeviceID is the Ironic node UUID (canonical form).
	DeviceID string
	// Removed marks the device removed.
	Removed bool
	// Conditions are the changed conditions (already validated).
	Conditions []condition.Condition
	// Facts, when non-nil, replace the stored facts.
	Facts *Facts
	// ObservedTime is when the satellite saw the node.
	ObservedTime time.Time
}

// Batch is a condition batch from one site's link.
type Batch struct {
	Sequence uint64
	// SnapshotID is set on every part of a snapshot; SnapshotFinal on the last.
	SnapshotID    string
	SnapshotFinal bool
	Devices       []DeviceUpdate
}

// BatchResult says what ApplyBatch did.
type BatchResult struct {
	// Duplicate is true when the sequence was already committed: nothing changed.
	Duplicate bool
	// RowsWritten counts rows inserted or updated (for ingest figures).
	RowsWritten int
}

// Device is a device as operators see it.
type Device struct {
	ID                string
	Site              string
	Name              string
	Facts             Facts
	Removed           bool
	RemovedAt         *time.Time
	ObservedAt        *time.Time
	Status            status.Status
	StatusReason      string
	StatusChangedAt   time.Time
	LastKnownStatus   status.Status
	DesiredImpairment Impairment
	DesiredGeneration int64
	AppliedGeneration int64
	LastCommandError  string
	// DriftCorrections counts resync corrections; LastDriftCorrection and
	// LastDriftCorrectionAt describe the last one.
	DriftCorrections      int64
	LastDriftCorrection   string
	LastDriftCorrectionAt *time.Time
	// Conditions are filled by GetDevice only, in condition.Types order.
	Conditions []condition.Condition
}

// StatusChange is one status history entry.
type StatusChange struct {
	Status    status.Status
	Reason    string
	ChangedAt time.Time
}

// ImpairmentChange is one quarantine/release history entry.
type ImpairmentChange struct {
	Desired    Impairment
	Generation int64
	Actor      string
	Reason     string
	Source     string
	CommandID  string
	ChangedAt  time.Time
}

// Command is a stored quarantine/release command.
type Command struct {
	ID           string
	DeviceID     string
	Site         string
	Generation   int64
	Desired      Impairment
	State        CommandState
	Actor        string
	Reason       string
	Source       string
	Attempts     int
	LastError    string
	ResultDetail string
	CreatedAt    time.Time
	UpdatedAt    time.Time
	CompletedAt  *time.Time
}

// Site is a site as operators see it.
type Site struct {
	Name             string
	LastSequence     uint64
	LastSeenAt       *time.Time
	Replica          string
	Stale            bool
	Connected        bool
	DeviceCount      int
	SatelliteVersion string
	Capabilities     []string
}

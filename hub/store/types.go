package store

import (
	"time"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/internal/condition"
)

// Impairment is a device's desired customer-readiness gate as stored:
// "NONE" (never touched), "QUARANTINED" (CUSTOM_CUSTOMER_READY absent),
// "RELEASED" (present: offered) or "RELEASED_UNOFFERED" (a quarantine
// ended on a device not offered before it: the trait is left alone).
type Impairment string

// Desired impairment states.
const (
	ImpairmentNone              Impairment = "NONE"
	ImpairmentQuarantined       Impairment = "QUARANTINED"
	ImpairmentReleased          Impairment = "RELEASED"
	ImpairmentReleasedUnoffered Impairment = "RELEASED_UNOFFERED"
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

// FailureClass is how a satellite classified a failed command, as stored:
// "" (not classified: a satellite older than the field; treated as
// transient), "TRANSIENT" (resent after the capped backoff) or "PERMANENT"
// (not resent until a newer desired state or RetryCommand).
type FailureClass string

// Failure classes (see proto FailureClass).
const (
	FailureUnclassified FailureClass = ""
	FailureTransient    FailureClass = "TRANSIENT"
	FailurePermanent    FailureClass = "PERMANENT"
)

// Valid reports whether f is one of the failure classes above.
func (f FailureClass) Valid() bool {
	return f == FailureUnclassified || f == FailureTransient || f == FailurePermanent
}

// Facts are the Ironic fields a device's conditions came from, plus the
// orphaned instances the satellite's sweep found on the node (stored as JSON
// in devices.facts; fields absent from older rows decode as zero values).
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
	// CPUs, MemoryMB (MiB), LocalGB (GiB) and CPUArch are Ironic's node
	// properties cpus, memory_mb, local_gb and cpu_arch, as inspection or
	// enrolment set them; nil when the satellite did not know them (and in
	// rows written before the fields existed).
	CPUs     *uint32 `json:"cpus,omitempty"`
	MemoryMB *uint64 `json:"memory_mb,omitempty"`
	LocalGB  *uint64 `json:"local_gb,omitempty"`
	CPUArch  *string `json:"cpu_arch,omitempty"`
	// InstanceMismatches are the node's orphaned instances (at most 16);
	// nil when Nova and Ironic agree, on standalone sites, and in rows
	// written before the field existed.
	InstanceMismatches []InstanceMismatch `json:"instance_mismatches,omitempty"`
	// Labels are the failure-domain labels the satellite mapped from the
	// node's Ironic fields (docs/reference/labels.md); nil when none.
	Labels map[string]string `json:"labels,omitempty"`
}

// MismatchKind names which side of an orphaned instance holds the record the
// other side lacks: "NOVA_UNKNOWN" or "NODE_UNAWARE".
type MismatchKind string

// Instance mismatch kinds (see proto InstanceMismatchKind).
const (
	// MismatchNovaUnknown: Ironic points at an instance Nova does not know
	// (404) or has deleted.
	MismatchNovaUnknown MismatchKind = "NOVA_UNKNOWN"
	// MismatchNodeUnaware: Nova has a live instance on the node, and the
	// node's instance_uuid is empty or names another instance.
	MismatchNodeUnaware MismatchKind = "NODE_UNAWARE"
)

// InstanceMismatch is one orphaned instance on a device: Nova and Ironic
// disagree about which instance runs on the node.
type InstanceMismatch struct {
	// Kind says which side lacks the record.
	Kind MismatchKind `json:"kind"`
	// IronicInstanceUUID is the node's instance_uuid in Ironic; "" when none.
	IronicInstanceUUID string `json:"ironic_instance_uuid,omitempty"`
	// NovaServerID is the Nova server involved.
	NovaServerID string `json:"nova_server_id,omitempty"`
	// NovaServerStatus is Nova's status of that server ("ACTIVE",
	// "DELETED", ...); "" when Nova answered 404.
	NovaServerStatus string `json:"nova_server_status,omitempty"`
	// NovaProjectID is the server's project; "" when Nova does not know it.
	NovaProjectID string `json:"nova_project_id,omitempty"`
	// FirstSeenTime is when the satellite first saw the mismatch (UTC).
	FirstSeenTime time.Time `json:"first_seen_time"`
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
	// committed LastSequence ("" when none did, or while the site's
	// snapshot is due: see OpenLink).
	LastSequenceBootID string
	// Replaced describes the link this one took over: the one the site had
	// open (on any replica) when this one opened; zero when none was open.
	Replaced ReplacedLink
}

// ReplacedLink is the site's previous link as OpenLink found it.
type ReplacedLink struct {
	// Open: the site had a link open when this one opened.
	Open bool
	// BootID is the previous link's satellite boot id.
	BootID string
	// Replica is the replica that held it.
	Replica string
	// Age is how long it had been open (database clock).
	Age time.Duration
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
	// Hardware, when non-nil, is the node's hardware as its satellite
	// read it (ironlink.v1.HardwareState as protobuf JSON, validated by
	// the link): it replaces the stored one and is added to the device's
	// hardware history.
	Hardware *Hardware
}

// Hardware is a device's hardware state as stored (device_hardware).
type Hardware struct {
	// JSON is the ironlink.v1.HardwareState in protobuf JSON.
	JSON []byte
	// ReadAt is when the satellite read it.
	ReadAt time.Time
	// InspectionFinishedAt is the node's inspection_finished_at it was
	// read at; nil when Ironic reported none.
	InspectionFinishedAt *time.Time
}

// Batch is a condition batch from one site's link.
type Batch struct {
	Sequence uint64
	// SnapshotID is set on every part of a snapshot; SnapshotFinal on the last.
	SnapshotID    string
	SnapshotFinal bool
	Devices       []DeviceUpdate
}

// endsSnapshot reports whether b is a snapshot's final part: applying it
// marks the site's devices it did not name removed and clears the site's
// snapshot_due.
func (b *Batch) endsSnapshot() bool { return b.SnapshotID != "" && b.SnapshotFinal }

// BatchResult says what ApplyBatch did.
type BatchResult struct {
	// Duplicate is true when the sequence was already committed: nothing changed.
	Duplicate bool
	// RowsWritten counts rows inserted or updated (for ingest figures).
	RowsWritten int
}

// Device is a device as operators see it.
type Device struct {
	// Labels are the effective failure-domain labels: the satellite's
	// (Facts.Labels) with the hub's labels file over them; nil when none.
	Labels            map[string]string
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
	// LastCommandFailureClass and LastCommandFailureReason classify
	// LastCommandError; both empty when it is.
	LastCommandFailureClass  FailureClass
	LastCommandFailureReason string
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
	// Action and Holder: what the entry did (holds.go); "" for entries
	// written before they were recorded.
	Action     Action
	Holder     string
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
	// FailureClass and FailureReason classify LastError; both empty when
	// it is, or when the satellite did not classify it.
	FailureClass  FailureClass
	FailureReason string
	// TraceParent and TraceState are the W3C trace context (traceparent
	// and tracestate header values) of the call that created the command,
	// taken from its ctx by SetDesiredImpairment or RetryCommand with the
	// OpenTelemetry TraceContext propagator; both empty when that ctx had
	// no valid span context (tracing off, an untraced caller).
	TraceParent string
	TraceState  string
	// Action is what the command did (QUARANTINE, RELEASE,
	// RELEASE_ALL_HOLDS, OFFER; "" before it was recorded) and Holder the
	// quarantine hold it added or released ("" for the others).
	Action Action
	Holder string
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
	// Conditions are the site conditions last reported by its satellite, in
	// condition.SiteTypes order; empty when none were reported.
	Conditions []condition.Condition
	// InstanceMismatchCount counts the site's devices, removed ones
	// excepted, with at least one InstanceMismatch in their facts.
	InstanceMismatchCount int
	// HealthWarningCount counts the site's devices, removed ones excepted,
	// with at least one health warning (docs/reference/conditions.md
	// "Health conditions").
	HealthWarningCount int
}

package condition

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// HealthPrefix starts the type of every health condition: a device's
// condition per (component class, check) reported by a health checker,
// "health.<componentClass>/<checkName>", for example
// "health.GPU/GpuXidError" (docs/reference/conditions.md "Health
// conditions"). The seven fixed types never start with it.
const HealthPrefix = "health."

// MaxHealthNameBytes is the longest component class or check name.
const MaxHealthNameBytes = 64

// Health condition reasons.
const (
	// ReasonHealthy: the last report was healthy.
	ReasonHealthy = "Healthy"
	// ReasonFatalError: the last report was unhealthy and fatal.
	ReasonFatalError = "FatalError"
	// ReasonNonFatalError: the last report was unhealthy, not fatal.
	ReasonNonFatalError = "NonFatalError"
	// ReasonStale: no report within the condition's TTL (status Unknown).
	ReasonStale = "Stale"
)

// StrategyStoreOnly is NVSentinel's ProcessingStrategy STORE_ONLY (2): the
// event is kept and shown, never changes status. Every other number acts.
const StrategyStoreOnly int32 = 2

// ValidHealthName reports whether s can be a component class or check
// name: 1 to MaxHealthNameBytes ASCII letters, digits, '_', '-' or '.',
// the first a letter or a digit (so "..." or "-" name nothing).
func ValidHealthName(s string) bool {
	if s == "" || len(s) > MaxHealthNameBytes {
		return false
	}
	if c := s[0]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case 'A' <= b && b <= 'Z', 'a' <= b && b <= 'z', '0' <= b && b <= '9', b == '_', b == '-', b == '.':
		default:
			return false
		}
	}
	return true
}

// HealthType returns the condition type of (class, check):
// "health.<class>/<check>". Both must pass ValidHealthName.
func HealthType(class, check string) Type { return Type(HealthPrefix + class + "/" + check) }

// IsHealth reports whether t is a health condition type (HealthPrefix,
// then a valid class, '/', a valid check).
func (t Type) IsHealth() bool {
	_, _, ok := t.HealthParts()
	return ok
}

// HealthParts splits a health condition type into its component class and
// check name; ok is false when t is not one.
func (t Type) HealthParts() (class, check string, ok bool) {
	rest, found := strings.CutPrefix(string(t), HealthPrefix)
	if !found {
		return "", "", false
	}
	class, check, found = strings.Cut(rest, "/")
	if !found || !ValidHealthName(class) || !ValidHealthName(check) {
		return "", "", false
	}
	return class, check, true
}

// Entity is one entity a health event impacts, for example GPU "0" or
// GPU_UUID "GPU-6a1c…" (NVSentinel's Entity).
type Entity struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// Health is what a health condition carries besides the usual fields: the
// last applied event (NVSentinel's HealthEvent fields). Stored as JSON in
// device_conditions.health and condition_history.health.
type Health struct {
	// Agent is the reporting checker, for example "gpu-health-monitor".
	Agent string `json:"agent"`
	// ComponentClass and CheckName are the condition's (class, check).
	ComponentClass string `json:"component_class"`
	CheckName      string `json:"check_name"`
	// Fatal: an unhealthy report makes the device FAULTED (when it acts).
	Fatal bool `json:"fatal,omitempty"`
	// RecommendedAction is NVSentinel's RecommendedAction number, kept as
	// sent even when ironlink does not know it.
	RecommendedAction int32 `json:"recommended_action,omitempty"`
	// ErrorCodes, for example ["79"] for XID 79.
	ErrorCodes []string `json:"error_codes,omitempty"`
	// Entities are the impacted entities.
	Entities []Entity `json:"entities,omitempty"`
	// ProcessingStrategy is NVSentinel's number: StrategyStoreOnly never
	// changes status; every other value (unknown ones too) acts.
	ProcessingStrategy int32 `json:"processing_strategy,omitempty"`
	// GeneratedTime is when the checker generated the event (clamped to
	// the hub's clock).
	GeneratedTime time.Time `json:"generated_time"`
	// ExpireTime is when the condition turns Unknown/Stale without a new
	// report.
	ExpireTime time.Time `json:"expire_time"`
	// EventID is the applied event's id.
	EventID string `json:"event_id,omitempty"`
	// Metadata is the event's free-form metadata.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Acts reports whether the event may change the device's status (not
// STORE_ONLY).
func (h *Health) Acts() bool { return h != nil && h.ProcessingStrategy != StrategyStoreOnly }

// sameHealth reports whether a and b say the same thing: every field but
// the times and the event id.
func sameHealth(a, b *Health) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Agent == b.Agent && a.ComponentClass == b.ComponentClass && a.CheckName == b.CheckName &&
		a.Fatal == b.Fatal && a.RecommendedAction == b.RecommendedAction && a.ProcessingStrategy == b.ProcessingStrategy &&
		slices.Equal(a.ErrorCodes, b.ErrorCodes) && slices.Equal(a.Entities, b.Entities) && maps.Equal(a.Metadata, b.Metadata)
}

// Fault reports whether c is a condition beside the seven that makes its
// device FAULTED: a health condition False (unhealthy), fatal, acting; or
// HardwareMatchesProfile False with reason MismatchFault.
func (c Condition) Fault() bool {
	return (c.Health != nil && c.Status == False && c.Health.Fatal && c.Health.Acts()) || c.hardwareFault()
}

// Warning reports whether c is a health condition that is a warning:
// False (unhealthy), not fatal, acting.
//
// HardwareMatchesProfile False but for MismatchFault is a warning too.
func (c Condition) Warning() bool {
	return (c.Health != nil && c.Status == False && !c.Health.Fatal && c.Health.Acts()) || c.hardwareWarning()
}

// ValidateHealth checks a health condition: its type, the usual fields,
// and that Health names the same (class, check).
func (c Condition) ValidateHealth() error {
	class, check, ok := c.Type.HealthParts()
	if !ok {
		return fmt.Errorf("condition type %q is not %s<componentClass>/<checkName>", c.Type, HealthPrefix)
	}
	if c.Health == nil || c.Health.ComponentClass != class || c.Health.CheckName != check {
		return fmt.Errorf("condition %s: health detail missing or for another check", c.Type)
	}
	return c.validateFields()
}

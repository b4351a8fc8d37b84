// Package wire converts between the shared condition vocabulary
// (internal/condition) and its protobuf form (ironlink.v1.Condition), for
// both ends of the link.
package wire

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
)

var toProtoStatus = map[condition.Status]ironlinkv1.ConditionStatus{
	condition.True:    ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE,
	condition.False:   ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE,
	condition.Unknown: ironlinkv1.ConditionStatus_CONDITION_STATUS_UNKNOWN,
}

// StatusFromProto is the condition status s stands for: True, False or
// Unknown, and false for any other value (UNSPECIFIED included).
func StatusFromProto(s ironlinkv1.ConditionStatus) (condition.Status, bool) {
	for st, p := range toProtoStatus {
		if p == s {
			return st, true
		}
	}
	return "", false
}

// ConditionToProto converts c to its wire form.
func ConditionToProto(c condition.Condition) *ironlinkv1.Condition {
	p := &ironlinkv1.Condition{
		Type:               string(c.Type),
		Status:             toProtoStatus[c.Status],
		Reason:             c.Reason,
		Message:            c.Message,
		ObservedGeneration: c.ObservedGeneration,
	}
	if !c.LastTransitionTime.IsZero() {
		p.LastTransitionTime = timestamppb.New(c.LastTransitionTime)
	}
	if !c.ObservedTime.IsZero() {
		p.ObservedTime = timestamppb.New(c.ObservedTime)
	}
	p.Health = HealthToProto(c.Health)
	return p
}

// HealthToProto converts a health condition's detail to its wire form (nil
// for nil). Recommended action and processing strategy numbers ironlink
// does not know are kept as they are.
func HealthToProto(h *condition.Health) *ironlinkv1.HealthDetail {
	if h == nil {
		return nil
	}
	p := &ironlinkv1.HealthDetail{
		Agent: h.Agent, ComponentClass: h.ComponentClass, CheckName: h.CheckName, IsFatal: h.Fatal,
		RecommendedAction:  ironlinkv1.HealthRecommendedAction(h.RecommendedAction),
		ErrorCodes:         h.ErrorCodes,
		ProcessingStrategy: ironlinkv1.HealthProcessingStrategy(h.ProcessingStrategy),
		EventId:            h.EventID, Metadata: h.Metadata,
	}
	for _, e := range h.Entities {
		p.EntitiesImpacted = append(p.EntitiesImpacted, &ironlinkv1.HealthEntity{EntityType: e.Type, EntityValue: e.Value})
	}
	if !h.GeneratedTime.IsZero() {
		p.GeneratedTime = timestamppb.New(h.GeneratedTime)
	}
	if !h.ExpireTime.IsZero() {
		p.ExpireTime = timestamppb.New(h.ExpireTime)
	}
	return p
}

// ConditionFromProto converts and validates a wire device condition. Errors
// name the bad field (see condition.Condition.Validate); a missing
// last_transition_time defaults to observed_time.
func ConditionFromProto(p *ironlinkv1.Condition) (condition.Condition, error) {
	return fromProto(p, condition.Condition.Validate)
}

// SiteConditionFromProto converts and validates a wire site condition (one
// of condition.SiteTypes; see condition.Condition.ValidateSite), otherwise
// like ConditionFromProto.
func SiteConditionFromProto(p *ironlinkv1.Condition) (condition.Condition, error) {
	return fromProto(p, condition.Condition.ValidateSite)
}

func fromProto(p *ironlinkv1.Condition, validate func(condition.Condition) error) (condition.Condition, error) {
	if p == nil {
		return condition.Condition{}, fmt.Errorf("condition is null")
	}
	c := condition.Condition{
		Type:               condition.Type(p.GetType()),
		Reason:             p.GetReason(),
		Message:            p.GetMessage(),
		ObservedGeneration: p.GetObservedGeneration(),
	}
	var ok bool
	if c.Status, ok = StatusFromProto(p.GetStatus()); !ok {
		return c, fmt.Errorf("condition %s: status %v is not TRUE, FALSE or UNKNOWN", c.Type, p.GetStatus())
	}
	if p.ObservedTime != nil {
		if err := p.ObservedTime.CheckValid(); err != nil {
			return c, fmt.Errorf("condition %s: observed_time: %w", c.Type, err)
		}
		c.ObservedTime = p.ObservedTime.AsTime()
	}
	if p.LastTransitionTime != nil {
		if err := p.LastTransitionTime.CheckValid(); err != nil {
			return c, fmt.Errorf("condition %s: last_transition_time: %w", c.Type, err)
		}
		c.LastTransitionTime = p.LastTransitionTime.AsTime()
	} else {
		c.LastTransitionTime = c.ObservedTime
	}
	if err := validate(c); err != nil {
		return c, err
	}
	return c, nil
}

// EnumName is a protobuf enum value's name without its prefix
// (EnumName(OPERATIONAL_STATUS_FAULTED, "OPERATIONAL_STATUS_") is "FAULTED"),
// and "" for the zero value (every ironlink.v1 enum's UNSPECIFIED). Both the
// CLI and the fleet view print enums this way.
func EnumName[E interface {
	~int32
	String() string
}](e E, prefix string) string {
	if e == 0 {
		return ""
	}
	return strings.TrimPrefix(e.String(), prefix)
}

// EnumFromName is the protobuf enum value named prefix+name
// (EnumFromName[ironlinkv1.ImpairmentState](store.ImpairmentQuarantined,
// ironlinkv1.ImpairmentState_value, "IMPAIRMENT_STATE_") is
// IMPAIRMENT_STATE_QUARANTINED), and the zero value (UNSPECIFIED) for a
// name the enum does not have: the hub's stored names are the enum names
// without their prefix.
func EnumFromName[E ~int32, S ~string](name S, values map[string]int32, prefix string) E {
	return E(values[prefix+string(name)])
}

// EnumToName is the inverse of EnumFromName: e's name without prefix, and
// "", false for the zero value (UNSPECIFIED) or a value the enum (names)
// does not define.
func EnumToName[S ~string, E ~int32](e E, names map[int32]string, prefix string) (S, bool) {
	name, ok := names[int32(e)]
	if !ok || e == 0 {
		return "", false
	}
	return S(strings.TrimPrefix(name, prefix)), true
}

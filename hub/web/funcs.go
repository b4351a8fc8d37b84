package web

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	hubstatus "github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/internal/labels"
	"github.com/ironlink/ironlink/internal/wire"
)

// statusName is an operational status without its enum prefix ("FAULTED").
func statusName(s ironlinkv1.OperationalStatus) string {
	return wire.EnumName(s, "OPERATIONAL_STATUS_")
}

// condName is a condition status as the SPEC writes it: True, False, Unknown.
func condName(s ironlinkv1.ConditionStatus) string {
	switch s {
	case ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE:
		return "True"
	case ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE:
		return "False"
	}
	return "Unknown"
}

// impName is a desired impairment state: QUARANTINED, RELEASED or NONE.
func impName(s ironlinkv1.ImpairmentState) string {
	if n := wire.EnumName(s, "IMPAIRMENT_STATE_"); n != "" {
		return n
	}
	return "NONE"
}

// humanAge says how long ago t was: "45s", "12m", "3h 5m", "2d 4h".
func humanAge(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd %dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

var funcs = template.FuncMap{
	"statusName": statusName,
	"condName":   condName,
	"impName":    impName,
	"cmdState": func(s ironlinkv1.CommandState) string {
		return strings.TrimPrefix(s.String(), "COMMAND_STATE_")
	},
	// ts formats a protobuf timestamp in UTC ("" when unset).
	"ts": func(t *timestamppb.Timestamp) string {
		if t == nil {
			return ""
		}
		return t.AsTime().UTC().Format("2006-01-02 15:04:05Z")
	},
	// age is how long ago a protobuf timestamp was.
	"age": func(t *timestamppb.Timestamp) string {
		if t == nil {
			return ""
		}
		return humanAge(time.Now(), t.AsTime())
	},
	"timeUTC":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"ageT":      func(t time.Time) string { return humanAge(time.Now(), t) },
	"str":       func(s hubstatus.Status) string { return string(s) },
	"lower":     strings.ToLower,
	"join":      strings.Join,
	"labels":    labels.String,
	"f1":        func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"condClass": condClass,
	"long":      func(s string) bool { return len(s) > clipBytes },
	"head":      clipHead,
	"dur":       dur,
	// durT is dur of times (end nil: until now).
	"durT": func(a time.Time, b *time.Time) string {
		var e *timestamppb.Timestamp
		if b != nil {
			e = timestamppb.New(*b)
		}
		return dur(timestamppb.New(a), e)
	},
	"opKind":    func(k ironlinkv1.OperationKind) string { return wire.EnumName(k, "OPERATION_KIND_") },
	"opState":   func(s ironlinkv1.OperationState) string { return wire.EnumName(s, "OPERATION_STATE_") },
	"polAction": func(a ironlinkv1.PolicyAction) string { return strings.ToLower(wire.EnumName(a, "POLICY_ACTION_")) },
	"outcome":   func(o ironlinkv1.ReleaseOutcome) string { return outcomeWords[o] },
	"short": func(id string) string {
		if len(id) > 8 {
			return id[:8]
		}
		return id
	},
}

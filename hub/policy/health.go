package policy

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/ironlink/ironlink/internal/condition"
)

// HealthMatch restricts a rule to devices FAULTED by a health condition
// (docs/reference/policy.md "Health rules"): the fatal health condition
// that set the status must match every list given (each list: any of its
// values; an empty list matches anything) and Fatal when set.
type HealthMatch struct {
	// ComponentClasses, for example "GPU".
	ComponentClasses []string `json:"component_classes"`
	// Checks, check names, for example "GpuXidError".
	Checks []string `json:"checks"`
	// ErrorCodes: the condition's last event carries one of them, for
	// example "79".
	ErrorCodes []string `json:"error_codes"`
	// RecommendedActions are NVSentinel RecommendedAction numbers (24 is
	// RESTART_BM).
	RecommendedActions []int32 `json:"recommended_actions"`
	// Fatal, when set, must equal the condition's fatal flag; nil matches
	// either. Only a fatal condition makes a device FAULTED, so false
	// matches no status trigger today (Warnings says so).
	Fatal *bool `json:"fatal,omitempty"`
}

// Matches reports whether h, a trigger's health cause (nil: the trigger
// is no health fault), matches m.
func (m *HealthMatch) Matches(h *condition.Health) bool {
	if h == nil {
		return false
	}
	if len(m.ComponentClasses) > 0 && !slices.Contains(m.ComponentClasses, h.ComponentClass) {
		return false
	}
	if len(m.Checks) > 0 && !slices.Contains(m.Checks, h.CheckName) {
		return false
	}
	if len(m.ErrorCodes) > 0 && !slices.ContainsFunc(h.ErrorCodes, func(c string) bool { return slices.Contains(m.ErrorCodes, c) }) {
		return false
	}
	if len(m.RecommendedActions) > 0 && !slices.Contains(m.RecommendedActions, h.RecommendedAction) {
		return false
	}
	if m.Fatal != nil && *m.Fatal != h.Fatal {
		return false
	}
	return true
}

// RecommendedActions are NVSentinel's RecommendedAction names with their
// numbers, as a rule's recommendedActions may name them.
var RecommendedActions = map[string]int32{
	"NONE": 0, "COMPONENT_RESET": 2, "CONTACT_SUPPORT": 5, "RUN_FIELDDIAG": 6, "RESTART_VM": 15,
	"RESTART_BM": 24, "REPLACE_VM": 25, "RUN_DCGMEUD": 26, "RESTART_APP": 39, "UNKNOWN": 99,
}

// healthYAML is a rule's `health:` key.
type healthYAML struct {
	ComponentClasses   []string `yaml:"componentClasses"`
	Checks             []string `yaml:"checks"`
	ErrorCodes         []string `yaml:"errorCodes"`
	RecommendedActions []string `yaml:"recommendedActions"`
	Fatal              *bool    `yaml:"fatal"`
}

// convertHealth checks and converts a rule's health match: names as
// health names ([A-Za-z0-9_.-], 1-64 bytes), error codes non-empty,
// recommended actions a name of RecommendedActions or a number, fatal a
// boolean when given.
func convertHealth(where string, hy *healthYAML) (*HealthMatch, []error) {
	if hy == nil {
		return nil, nil
	}
	var errs []error
	m := &HealthMatch{ComponentClasses: hy.ComponentClasses, Checks: hy.Checks, ErrorCodes: hy.ErrorCodes, Fatal: hy.Fatal}
	for key, list := range map[string][]string{"componentClasses": hy.ComponentClasses, "checks": hy.Checks} {
		for _, v := range list {
			if !condition.ValidHealthName(v) {
				errs = append(errs, fmt.Errorf("%s.health.%s: %q must be 1 to %d of [A-Za-z0-9_.-]", where, key, v, condition.MaxHealthNameBytes))
			}
		}
	}
	for _, c := range hy.ErrorCodes {
		if c == "" || len(c) > 64 {
			errs = append(errs, fmt.Errorf("%s.health.errorCodes: %q must be 1 to 64 bytes", where, c))
		}
	}
	for _, a := range hy.RecommendedActions {
		n, ok := RecommendedActions[a]
		if !ok {
			v, err := strconv.ParseInt(a, 10, 32)
			if err != nil || v < 0 {
				errs = append(errs, fmt.Errorf("%s.health.recommendedActions: %q is neither an NVSentinel RecommendedAction name (RESTART_BM, ...) nor a number", where, a))
				continue
			}
			n = int32(v)
		}
		m.RecommendedActions = append(m.RecommendedActions, n)
	}
	if len(m.ComponentClasses)+len(m.Checks)+len(m.ErrorCodes)+len(m.RecommendedActions) == 0 && m.Fatal == nil {
		errs = append(errs, fmt.Errorf("%s.health: give at least one of componentClasses, checks, errorCodes, recommendedActions, fatal", where))
	}
	return m, errs
}

package policy

import (
	"fmt"
	"regexp"
	"slices"
)

// ValidationMatch makes a rule a validation rule
// (docs/reference/policy.md "Validation rules"): it matches a failed
// validation run (docs/reference/hardware.md "Validation") whose failing
// checks include any of Checks, never a status trigger; the policy then
// quarantines the device by the rule and runs the rule's ladder, each step
// followed by a validation run again.
type ValidationMatch struct {
	// Checks are check names as a run names its failing checks: the
	// external checkers' names, "hardware-profile" (the hub's own check)
	// and "operation" (the VALIDATE operation failed); "*" matches any.
	Checks []string `json:"checks"`
}

// validationYAML is a rule's `validation:` key.
type validationYAML struct {
	Checks []string `yaml:"checks"`
}

// checkNameRE is a validation check name (as ValidationService takes it),
// or "*".
var checkNameRE = regexp.MustCompile(`^([A-Za-z0-9_.-]{1,64}|\*)$`)

// Matches reports whether a failed run's failing checks match m.
func (m *ValidationMatch) Matches(failing []string) bool {
	if m == nil {
		return false
	}
	if slices.Contains(m.Checks, "*") {
		return len(failing) > 0
	}
	return slices.ContainsFunc(failing, func(c string) bool { return slices.Contains(m.Checks, c) })
}

// convertValidation checks a rule's validation match: at least one check
// name, and a ladder (a validation rule does nothing else).
func convertValidation(where string, vy *validationYAML, ry ruleYAML) (*ValidationMatch, []error) {
	if vy == nil {
		return nil, nil
	}
	var errs []error
	if len(vy.Checks) == 0 {
		errs = append(errs, fmt.Errorf("%s.validation.checks: required (check names, or \"*\" for any)", where))
	}
	for _, c := range vy.Checks {
		if !checkNameRE.MatchString(c) {
			errs = append(errs, fmt.Errorf("%s.validation.checks: %q must be 1 to 64 of [A-Za-z0-9_.-], or \"*\"", where, c))
		}
	}
	if ry.Remediation == nil {
		errs = append(errs, fmt.Errorf("%s.validation: requires remediation (a validation rule only starts a ladder)", where))
	}
	for key, set := range map[string]bool{"health": ry.Health != nil, "from": len(ry.From) > 0, "to": len(ry.To) > 0,
		"reasons": len(ry.Reasons) > 0, "holdDown": ry.HoldDown != "", "labels": len(ry.Labels) > 0} {
		if set {
			errs = append(errs, fmt.Errorf("%s.%s: not allowed with validation (a validation rule matches failed validation runs only)", where, key))
		}
	}
	return &ValidationMatch{Checks: vy.Checks}, errs
}

// MatchValidation returns the first validation rule of p matching a
// failed run's failing checks that has a ladder (ok=false when none).
func MatchValidation(p SitePolicy, failing []string) (Rule, bool) {
	for _, r := range p.Rules {
		if r.Validation != nil && r.Ladder != nil && r.Validation.Matches(failing) {
			return r, true
		}
	}
	return Rule{}, false
}

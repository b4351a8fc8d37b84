package policy

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ironlink/ironlink/internal/labels"
)

// Ladder is a rule's remediation ladder (docs/reference/policy.md
// "Remediation ladders"): once the rule has quarantined a device (its hold
// policy:<rule>) and the device still shows the fault, the steps run in
// order, each an operation on the device; a step succeeds when the device's
// conditions are good again (its status no longer FAULTED or MAINTENANCE)
// and stay good for Settle; a step whose operation fails, or that is not
// good by its Timeout, hands on to the next one. After the last step, or
// once the device's Budget is spent, or when the fault's recommended action
// is one of HandoffOn, the device is handed off for repair.
type Ladder struct {
	// Steps are tried in order (1 to MaxLadderSteps).
	Steps []LadderStep `json:"steps"`
	// Settle is how long the conditions must stay good for a step to
	// count as the fix (≥ 0; default DefaultSettle).
	Settle time.Duration `json:"settle"`
	// Budget bounds the ladders started per device.
	Budget Budget `json:"budget"`
	// Release says what happens after a fix: ReleaseAutomatic releases the
	// rule's hold once the settle time has passed; ReleaseOperator leaves
	// the device quarantined for an operator.
	Release string `json:"release"`
	// HandoffOn are NVSentinel RecommendedAction numbers: a device whose
	// fault recommends one is handed off at once (default CONTACT_SUPPORT).
	HandoffOn []int32 `json:"handoff_on"`
	// DryRun: the ladder only plans ("would reboot X now, step 1 of 3")
	// and writes nothing, while the rule's quarantines stay live.
	DryRun bool `json:"dry_run"`
	// ActOnCustomerInstances lets the steps act on a device with a
	// customer instance (CustomerAllocated=True): the steps do not wait
	// for it and their operations are forced past the customer guard,
	// which is recorded (forced). Off by default: such a device waits.
	ActOnCustomerInstances bool `json:"act_on_customer_instances,omitempty"`
}

// LadderStep is one rung: an operation of kind Kind with Params.
type LadderStep struct {
	// Kind is a stored OperationKind name (one of LadderKinds).
	Kind string `json:"kind"`
	// Timeout bounds the step: from the start of its operation until the
	// device must be good (> 0, at most MaxStepTimeout).
	Timeout time.Duration `json:"timeout"`
	// Soft: a soft (ACPI) power off for POWER_OFF and REBOOT.
	Soft bool `json:"soft,omitempty"`
	// PowerTimeout is the timeout Ironic gives a power change (POWER_ON,
	// POWER_OFF, REBOOT; 0 = Ironic's default; whole seconds, ≤ 1h).
	PowerTimeout time.Duration `json:"power_timeout,omitempty"`
	// MaintenanceReason is SET_MAINTENANCE's reason (required there).
	MaintenanceReason string `json:"maintenance_reason,omitempty"`
	// Template is NOVA_CREATE's named template of the hub's
	// --nova-templates-file (required there; the server is named after
	// the device).
	Template string `json:"template,omitempty"`
	// Continue: once the step's operation succeeds, the next step starts
	// without the success test (the parts of one repair, e.g. NOVA_DELETE
	// and REPROVISION before NOVA_CREATE of a SLURM worker's template).
	// Its operation failing, or not succeeding by Timeout, fails the step
	// as any. Refused on a ladder's last step.
	Continue bool `json:"continue,omitempty"`
}

// Budget is the attempt budget of a ladder: at most Ladders ladders per
// device within any Window; a fault beyond it is handed off at once.
type Budget struct {
	// Ladders is the most ladders per device per Window (≥ 1).
	Ladders int `json:"ladders"`
	// Window is the sliding window (≥ 1m).
	Window time.Duration `json:"window"`
}

// Release choices of a ladder.
const (
	// ReleaseAutomatic: a fixed device is released by the ladder.
	ReleaseAutomatic = "automatic"
	// ReleaseOperator: a fixed device stays quarantined for an operator.
	ReleaseOperator = "operator"
)

// Ladder defaults and limits.
const (
	// DefaultSettle is a ladder's settle time when it names none.
	DefaultSettle = 5 * time.Minute
	// MaxLadderSteps is the most steps a ladder may have.
	MaxLadderSteps = 10
	// MaxStepTimeout is the longest step timeout.
	MaxStepTimeout = 24 * time.Hour
	// MaxPowerTimeout is the longest power timeout (Ironic's limit as the
	// operations API takes it).
	MaxPowerTimeout = time.Hour
)

// DefaultBudget is the budget of a ladder that names none: 3 ladders per
// device in 7 days.
var DefaultBudget = Budget{Ladders: 3, Window: 7 * 24 * time.Hour}

// DefaultHandoffOn is HandoffOn when a ladder names none: CONTACT_SUPPORT.
var DefaultHandoffOn = []int32{5}

// LadderKinds are the operation kinds a step may name: the node actions,
// the lifecycle operations that need no parameters beyond a step's, and
// NOVA_CREATE by a named template.
var LadderKinds = []string{"POWER_ON", "POWER_OFF", "REBOOT", "SET_MAINTENANCE", "CLEAR_MAINTENANCE", "REPROVISION",
	"INSPECT", "PROVIDE", "UNDEPLOY", "NOVA_DELETE", "NOVA_CREATE"}

// DefaultMaxInFlight is the most remediation steps in flight per site when
// the site's policy names no remediation.maxInFlight.
const DefaultMaxInFlight = 2

// Remediation is a site's remediation settings.
type Remediation struct {
	// MaxInFlight is K, the blast-radius guard of ladders: at most K steps
	// of the site's ladders have an operation in flight at once (≥ 1).
	MaxInFlight int `json:"max_in_flight"`
	// PerLabel are the failure-domain limits (the file's
	// remediation.perLabel; a site's list replaces the default's): at most
	// MaxInFlight steps in flight per value of each label, e.g. per rack.
	PerLabel []LabelInFlight `json:"per_label"`
}

// LabelInFlight is the blast-radius guard of ladders per failure domain:
// at most MaxInFlight steps of a site's ladders in flight at once among the
// devices carrying the same value of Label (docs/reference/labels.md). A
// device without the label is not limited by it.
type LabelInFlight struct {
	// Label is the label key, e.g. "rack".
	Label string `json:"label"`
	// MaxInFlight is the limit per value (≥ 1).
	MaxInFlight int `json:"max_in_flight"`
}

// Describe renders step i (0-based) of l for plans and explanations:
// "REBOOT (step 1 of 3, timeout 10m0s)".
func (l *Ladder) Describe(i int) string {
	if i < 0 || i >= len(l.Steps) {
		return "none"
	}
	return fmt.Sprintf("%s (step %d of %d, timeout %s)", l.Steps[i].Kind, i+1, len(l.Steps), l.Steps[i].Timeout)
}

// Verb is the step's kind as a verb phrase for plans ("reboot",
// "reprovision", "set maintenance on").
func (s LadderStep) Verb() string {
	switch s.Kind {
	case "SET_MAINTENANCE":
		return "set maintenance on"
	case "CLEAR_MAINTENANCE":
		return "clear maintenance of"
	}
	return strings.ReplaceAll(strings.ToLower(s.Kind), "_", " ")
}

// YAML shapes of a ladder.
type ladderYAML struct {
	Steps     []stepYAML  `yaml:"steps"`
	Settle    string      `yaml:"settle"`
	Budget    *budgetYAML `yaml:"budget"`
	Release   string      `yaml:"release"`
	HandoffOn []string    `yaml:"handoffOn"`
	DryRun    bool        `yaml:"dryRun"`
	Customer  bool        `yaml:"actOnCustomerInstances"`
}

type stepYAML struct {
	Action            string `yaml:"action"`
	Timeout           string `yaml:"timeout"`
	Soft              bool   `yaml:"soft"`
	PowerTimeout      string `yaml:"powerTimeout"`
	MaintenanceReason string `yaml:"maintenanceReason"`
	Template          string `yaml:"template"`
	Continue          bool   `yaml:"continue"`
}

type budgetYAML struct {
	Ladders *int   `yaml:"ladders"`
	Window  string `yaml:"window"`
}

type remediationYAML struct {
	MaxInFlight *int                 `yaml:"maxInFlight"`
	PerLabel    *[]labelInFlightYAML `yaml:"perLabel"`
}

type labelInFlightYAML struct {
	Label       string `yaml:"label"`
	MaxInFlight int    `yaml:"maxInFlight"`
}

// duration parses a positive-or-zero duration field, naming it on error.
func duration(field, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %w", field, v, err)
	}
	if d < 0 {
		return 0, fmt.Errorf("%s %s is negative", field, d)
	}
	return d, nil
}

// convertLadder checks and converts a rule's `remediation:` key (where is
// the rule's path). A rule with a ladder must not auto-release: the ladder's
// release decides.
func convertLadder(where string, ly *ladderYAML, autoRelease string) (*Ladder, []error) {
	if ly == nil {
		return nil, nil
	}
	where += ".remediation"
	var errs []error
	l := &Ladder{Settle: DefaultSettle, Budget: DefaultBudget, Release: ReleaseAutomatic, HandoffOn: DefaultHandoffOn, DryRun: ly.DryRun,
		ActOnCustomerInstances: ly.Customer}
	if autoRelease != "" {
		errs = append(errs, fmt.Errorf("%s: a rule with a ladder must not set autoReleaseAfter (remediation.release decides)", where))
	}
	if len(ly.Steps) == 0 || len(ly.Steps) > MaxLadderSteps {
		errs = append(errs, fmt.Errorf("%s.steps: %d steps, want 1 to %d", where, len(ly.Steps), MaxLadderSteps))
	}
	for i, sy := range ly.Steps {
		s, serrs := convertStep(fmt.Sprintf("%s.steps[%d]", where, i), sy)
		errs = append(errs, serrs...)
		if s.Continue && i == len(ly.Steps)-1 {
			errs = append(errs, fmt.Errorf("%s.steps[%d].continue: the last step has no next step to continue with", where, i))
		}
		l.Steps = append(l.Steps, s)
	}
	if ly.Settle != "" {
		d, err := duration(where+".settle", ly.Settle)
		if err != nil {
			errs = append(errs, err)
		}
		l.Settle = d
	}
	errs = append(errs, convertBudget(where+".budget", ly.Budget, &l.Budget)...)
	switch ly.Release {
	case "":
	case ReleaseAutomatic, ReleaseOperator:
		l.Release = ly.Release
	default:
		errs = append(errs, fmt.Errorf("%s.release %q: want %s or %s", where, ly.Release, ReleaseAutomatic, ReleaseOperator))
	}
	if ly.HandoffOn != nil {
		l.HandoffOn = nil
		for _, a := range ly.HandoffOn {
			n, ok := RecommendedActions[a]
			if !ok {
				errs = append(errs, fmt.Errorf("%s.handoffOn: %q is not an NVSentinel RecommendedAction name (CONTACT_SUPPORT, ...)", where, a))
				continue
			}
			l.HandoffOn = append(l.HandoffOn, n)
		}
	}
	return l, errs
}

func convertBudget(where string, by *budgetYAML, b *Budget) []error {
	if by == nil {
		return nil
	}
	var errs []error
	if by.Ladders != nil {
		b.Ladders = *by.Ladders
		if b.Ladders < 1 || b.Ladders > 100 {
			errs = append(errs, fmt.Errorf("%s.ladders %d: want 1 to 100", where, b.Ladders))
		}
	}
	if by.Window != "" {
		d, err := duration(where+".window", by.Window)
		if err != nil {
			errs = append(errs, err)
		} else if d < time.Minute {
			errs = append(errs, fmt.Errorf("%s.window %s: must be at least 1m", where, d))
		}
		b.Window = d
	}
	return errs
}

func convertStep(where string, sy stepYAML) (LadderStep, []error) {
	var errs []error
	s := LadderStep{Kind: sy.Action, Soft: sy.Soft, MaintenanceReason: sy.MaintenanceReason, Template: sy.Template, Continue: sy.Continue}
	if !slices.Contains(LadderKinds, sy.Action) {
		errs = append(errs, fmt.Errorf("%s.action %q: want one of %s", where, sy.Action, strings.Join(LadderKinds, ", ")))
	}
	if sy.Timeout == "" {
		errs = append(errs, fmt.Errorf("%s.timeout: required", where))
	} else if d, err := duration(where+".timeout", sy.Timeout); err != nil {
		errs = append(errs, err)
	} else if d <= 0 || d > MaxStepTimeout {
		errs = append(errs, fmt.Errorf("%s.timeout %s: want more than 0 and at most %s", where, d, MaxStepTimeout))
	} else {
		s.Timeout = d
	}
	power := sy.Action == "POWER_ON" || sy.Action == "POWER_OFF" || sy.Action == "REBOOT"
	if sy.Soft && sy.Action != "POWER_OFF" && sy.Action != "REBOOT" {
		errs = append(errs, fmt.Errorf("%s.soft: only for POWER_OFF and REBOOT", where))
	}
	if sy.PowerTimeout != "" {
		d, err := duration(where+".powerTimeout", sy.PowerTimeout)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !power:
			errs = append(errs, fmt.Errorf("%s.powerTimeout: only for POWER_ON, POWER_OFF and REBOOT", where))
		case d > MaxPowerTimeout || d%time.Second != 0:
			errs = append(errs, fmt.Errorf("%s.powerTimeout %s: whole seconds, at most %s", where, d, MaxPowerTimeout))
		}
		s.PowerTimeout = d
	}
	switch {
	case sy.Action == "SET_MAINTENANCE" && (sy.MaintenanceReason == "" || len(sy.MaintenanceReason) > 255):
		errs = append(errs, fmt.Errorf("%s.maintenanceReason: required for SET_MAINTENANCE, at most 255 bytes", where))
	case sy.Action != "SET_MAINTENANCE" && sy.MaintenanceReason != "":
		errs = append(errs, fmt.Errorf("%s.maintenanceReason: only for SET_MAINTENANCE", where))
	}
	return s, append(errs, checkTemplate(where, sy)...)
}

// templateRE is a Nova create template's name (hub/novatemplate).
var templateRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// checkTemplate refuses a NOVA_CREATE step without a template name and a
// template on another kind. Whether the site has the template is known
// when the step starts (the templates file is reloaded on its own).
func checkTemplate(where string, sy stepYAML) []error {
	switch {
	case sy.Action == "NOVA_CREATE" && !templateRE.MatchString(sy.Template):
		return []error{fmt.Errorf("%s.template %q: NOVA_CREATE needs the name of a Nova create template (1-63 of [a-z0-9._-])", where, sy.Template)}
	case sy.Action != "NOVA_CREATE" && sy.Template != "":
		return []error{fmt.Errorf("%s.template: only for NOVA_CREATE", where)}
	}
	return nil
}

// convertRemediation checks and converts a site's `remediation:` key: its
// maxInFlight (nil when not given) and perLabel list (nil when not given).
func convertRemediation(where string, ry *remediationYAML) (*int, *[]LabelInFlight, []error) {
	if ry == nil {
		return nil, nil, nil
	}
	var errs []error
	if k := ry.MaxInFlight; k != nil && (*k < 1 || *k > 10000) {
		errs = append(errs, fmt.Errorf("%s.remediation.maxInFlight %d: want 1 to 10000", where, *k))
	}
	if ry.PerLabel == nil {
		return ry.MaxInFlight, nil, errs
	}
	out := make([]LabelInFlight, 0, len(*ry.PerLabel))
	seen := map[string]bool{}
	for i, y := range *ry.PerLabel {
		w := fmt.Sprintf("%s.remediation.perLabel[%d]", where, i)
		if !labels.ValidKey(y.Label) {
			errs = append(errs, fmt.Errorf("%s.label %q: not a label key (1 to %d of [A-Za-z0-9._-])", w, y.Label, labels.MaxBytes))
		}
		if seen[y.Label] {
			errs = append(errs, fmt.Errorf("%s.label %q: given twice", w, y.Label))
		}
		seen[y.Label] = true
		if y.MaxInFlight < 1 || y.MaxInFlight > 10000 {
			errs = append(errs, fmt.Errorf("%s.maxInFlight %d: want 1 to 10000", w, y.MaxInFlight))
		}
		out = append(out, LabelInFlight(y))
	}
	return ry.MaxInFlight, &out, errs
}

package policy

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.yaml.in/yaml/v3"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/internal/filewatch"
)

// OfferedStatuses are the statuses of a device offered to customers: the
// default "from" of a rule (docs/design/requirements.md "Quarantine policy (hub)").
var OfferedStatuses = []status.Status{status.Available, status.Allocated, status.InService}

// TriggerStatuses are the statuses a rule may react to (its "to"): the
// device turned FAULTED or MAINTENANCE. They are also the default "to".
var TriggerStatuses = []status.Status{status.Faulted, status.Maintenance}

// File is the policy file: the `policy` key of a YAML document in the hub
// chart's values shape (deploy/charts/hub/values.yaml); other top-level
// keys are ignored, so the chart's whole values file is a policy file too.
// Inside `policy` every key must be known.
type File struct {
	// Default is the fleet-wide policy, used for every site without an
	// entry in Sites and as the base each entry overrides.
	Default SitePolicy
	// Sites are per-site overrides by site name.
	Sites map[string]Override
}

// SitePolicy is the policy of one site (or the fleet-wide default).
type SitePolicy struct {
	// Enabled turns automatic quarantine on for the site (default false:
	// a file without `enabled: true` only serves maintenance windows).
	Enabled bool `json:"enabled"`
	// DryRun records every decision and changes nothing (no command, no
	// pending action, no guard trip), for every rule of the site.
	DryRun bool `json:"dry_run"`
	// Rules are tried in order; the first whose from/to/reasons match a
	// device's status change decides.
	Rules []Rule `json:"rules"`
	// Guard is the blast-radius guard.
	Guard Guard `json:"guard"`
	// Domains are the per-label guards (the file's guard.perLabel;
	// domains.go), in Guard's window.
	Domains []DomainGuard `json:"per_label,omitempty"`
	// MaintenanceWindows: a MAINTENANCE trigger inside one is skipped.
	MaintenanceWindows []Window `json:"maintenance_windows"`
	// Remediation holds the site's ladder settings (ladder.go).
	Remediation Remediation `json:"remediation"`
}

// Rule is one automatic-quarantine rule.
type Rule struct {
	// Name identifies the rule in decisions, commands and the API
	// ([a-z0-9-], 1-63 bytes, unique per site).
	Name string `json:"name"`
	// From: the device's previous status must be one of these
	// (default OfferedStatuses; only offered statuses are allowed).
	From []status.Status `json:"from"`
	// To: the status the device turned (default TriggerStatuses; only
	// FAULTED and MAINTENANCE are allowed).
	To []status.Status `json:"to"`
	// Reasons, when not empty, restrict the rule to these condition
	// reasons (the reason of ProvisioningHealthy for FAULTED, of
	// MaintenanceClear for MAINTENANCE), e.g. DeployFailed, PowerFailure.
	Reasons []string `json:"reasons"`
	// HoldDown: the cause must have held this long before the rule acts
	// (0 = at once).
	HoldDown time.Duration `json:"hold_down"`
	// AutoReleaseAfter: a device this rule quarantined is released by
	// policy once its cause has been cleared this long (0 = never: an
	// operator releases it).
	AutoReleaseAfter time.Duration `json:"auto_release_after"`
	// DryRun makes this rule log only, even when the site is live.
	DryRun bool `json:"dry_run"`
	// Health, when set, restricts the rule to devices FAULTED by a
	// matching health condition (health.go).
	Health *HealthMatch `json:"health,omitempty"`
	// Validation, when set, makes the rule match failed validation runs
	// only, never a status trigger (validation.go).
	Validation *ValidationMatch `json:"validation,omitempty"`
	// Ladder, when set, remediates the devices the rule quarantined
	// (ladder.go).
	Ladder *Ladder `json:"remediation,omitempty"`
	// Labels, when set, restricts the rule to devices carrying every one
	// of these labels (domains.go).
	Labels map[string]string `json:"labels,omitempty"`
}

// Guard is the blast-radius guard of a site: within any Window, policy
// quarantines at most MaxDevices devices and at most MaxPercent percent of
// the site's devices not removed (counted when the rule fires).
type Guard struct {
	// MaxDevices is N (≥ 1).
	MaxDevices int `json:"max_devices"`
	// MaxPercent is P, in percent (0 < P ≤ 100).
	MaxPercent float64 `json:"max_percent"`
	// Window is the sliding window (≥ 1 s).
	Window time.Duration `json:"window"`
}

// DefaultGuard is the guard of a policy that names none: 5 devices, 10 %,
// one hour.
var DefaultGuard = Guard{MaxDevices: 5, MaxPercent: 10, Window: time.Hour}

// Window is a maintenance window: [Start, End) and, with Every > 0, the same
// interval shifted by every whole multiple of Every after it.
type Window struct {
	// Name identifies the window (free text, for decisions).
	Name string `json:"name"`
	// Start and End bound the first occurrence (Start inclusive, End
	// exclusive; End after Start).
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Every is the recurrence period (0 = once); "daily" is 24h, "weekly"
	// 168h; it must not be shorter than End-Start.
	Every time.Duration `json:"every"`
	// Devices, when not empty, limits the window to these devices (node
	// UUIDs); empty means the whole site.
	Devices []string `json:"devices"`
}

// Override is a site's entry: fields set override the default's (a nil
// pointer or slice keeps the default's); Rules, when present, replace the
// default's list whole; MaintenanceWindows are added to the default's.
type Override struct {
	Enabled            *bool
	DryRun             *bool
	Rules              []Rule
	HasRules           bool
	Guard              GuardOverride
	Domains            *[]DomainGuard
	MaintenanceWindows []Window
	// MaxInFlight overrides Remediation.MaxInFlight.
	MaxInFlight *int
	// PerLabel, when not nil, replaces Remediation.PerLabel.
	PerLabel *[]LabelInFlight
}

// GuardOverride overrides some fields of the default guard.
type GuardOverride struct {
	MaxDevices *int
	MaxPercent *float64
	Window     *time.Duration
}

// Effective returns the policy in force at site: the default with the
// site's override applied.
func (f *File) Effective(site string) SitePolicy {
	p := f.Default
	p.Rules = slices.Clone(p.Rules)
	p.MaintenanceWindows = slices.Clone(p.MaintenanceWindows)
	o, ok := f.Sites[site]
	if !ok {
		return p
	}
	if o.Enabled != nil {
		p.Enabled = *o.Enabled
	}
	if o.DryRun != nil {
		p.DryRun = *o.DryRun
	}
	if o.HasRules {
		p.Rules = slices.Clone(o.Rules)
	}
	if o.Guard.MaxDevices != nil {
		p.Guard.MaxDevices = *o.Guard.MaxDevices
	}
	if o.Guard.MaxPercent != nil {
		p.Guard.MaxPercent = *o.Guard.MaxPercent
	}
	if o.Guard.Window != nil {
		p.Guard.Window = *o.Guard.Window
	}
	if o.Domains != nil {
		p.Domains = *o.Domains
	}
	p.MaintenanceWindows = append(p.MaintenanceWindows, o.MaintenanceWindows...)
	if o.MaxInFlight != nil {
		p.Remediation.MaxInFlight = *o.MaxInFlight
	}
	if o.PerLabel != nil {
		p.Remediation.PerLabel = *o.PerLabel
	}
	return p
}

// SiteNames returns the sites with an override, sorted.
func (f *File) SiteNames() []string {
	out := make([]string, 0, len(f.Sites))
	for s := range f.Sites {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Disabled is the file in force when the hub has no --policy-file: no
// site has automatic quarantine.
func Disabled() *File {
	return &File{Default: SitePolicy{Guard: DefaultGuard, Remediation: Remediation{MaxInFlight: DefaultMaxInFlight}}}
}

// Load reads and validates the policy file at path (see Parse). Errors
// start with the path.
func Load(path string) (*File, error) { return filewatch.ReadConfig(path, "policy file", Parse) }

// YAML shapes (camelCase keys, as the chart's values).
type policyYAML struct {
	Default siteYAML            `yaml:"default"`
	Sites   map[string]siteYAML `yaml:"sites"`
}

type siteYAML struct {
	Enabled            *bool            `yaml:"enabled"`
	DryRun             *bool            `yaml:"dryRun"`
	Rules              *[]ruleYAML      `yaml:"rules"`
	Guard              *guardYAML       `yaml:"guard"`
	MaintenanceWindows []windowYAML     `yaml:"maintenanceWindows"`
	Remediation        *remediationYAML `yaml:"remediation"`
}

type ruleYAML struct {
	Name             string            `yaml:"name"`
	From             []string          `yaml:"from"`
	To               []string          `yaml:"to"`
	Reasons          []string          `yaml:"reasons"`
	HoldDown         string            `yaml:"holdDown"`
	AutoReleaseAfter string            `yaml:"autoReleaseAfter"`
	DryRun           bool              `yaml:"dryRun"`
	Health           *healthYAML       `yaml:"health"`
	Validation       *validationYAML   `yaml:"validation"`
	Remediation      *ladderYAML       `yaml:"remediation"`
	Labels           map[string]string `yaml:"labels"`
}

type guardYAML struct {
	MaxDevices *int          `yaml:"maxDevices"`
	MaxPercent *float64      `yaml:"maxPercent"`
	Window     *string       `yaml:"window"`
	PerLabel   *[]domainYAML `yaml:"perLabel"`
}

type windowYAML struct {
	Name       string   `yaml:"name"`
	Start      string   `yaml:"start"`
	End        string   `yaml:"end"`
	Recurrence string   `yaml:"recurrence"`
	Devices    []string `yaml:"devices"`
}

var (
	nameRE   = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	reasonRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,63}$`)
)

// Parse parses and validates a policy document:
//
//	policy:
//	  default:                     # fleet-wide; every site without an entry
//	    enabled: true
//	    dryRun: true               # log decisions only
//	    guard: {maxDevices: 5, maxPercent: 10, window: 1h}
//	    rules:
//	      - name: offered-faulted
//	        from: [AVAILABLE, ALLOCATED, IN_SERVICE]   # default
//	        to: [FAULTED, MAINTENANCE]                 # default
//	        reasons: [PowerFailure, CleanFailure, DeployFailed]  # optional
//	        holdDown: 2m
//	        autoReleaseAfter: 30m  # optional
//	    maintenanceWindows:
//	      - {name: patch, start: "2026-12-06T02:00:00Z", end: "2026-12-06T04:00:00Z", recurrence: weekly}
//	  sites:
//	    site-b: {dryRun: false, guard: {maxDevices: 3}}
//
// Every problem is reported (errors.Join), each naming where it is
// ("sites.site-b.rules[0].holdDown: ..."). A document without a `policy`
// key is an error (a typo must not turn policy off silently).
func Parse(data []byte) (*File, error) {
	var top map[string]yaml.Node
	if err := yaml.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("parse YAML: %w", err)
	}
	node, ok := top["policy"]
	if !ok {
		return nil, errors.New("no `policy` key")
	}
	raw, err := yaml.Marshal(&node)
	if err != nil {
		return nil, fmt.Errorf("re-encode policy: %w", err)
	}
	var py policyYAML
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&py); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	var errs []error
	f := &File{Sites: map[string]Override{}}
	def, derrs := convertSite("default", py.Default, true)
	errs = append(errs, derrs...)
	f.Default = def.base
	for name, sy := range py.Sites {
		where := "sites." + name
		if !nameRE.MatchString(name) {
			errs = append(errs, fmt.Errorf("%s: site name must be [a-z0-9-], 1-63 bytes", where))
		}
		s, serrs := convertSite(where, sy, false)
		errs = append(errs, serrs...)
		f.Sites[name] = s.override
	}
	// The effective policy of every named site must be valid as a whole
	// (e.g. rules inherited from the default are unique).
	for _, name := range f.SiteNames() {
		errs = append(errs, checkEffective("sites."+name, f.Effective(name))...)
	}
	errs = append(errs, checkEffective("default", f.Default)...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return f, nil
}

type converted struct {
	base     SitePolicy
	override Override
}

func convertSite(where string, sy siteYAML, isDefault bool) (converted, []error) {
	var errs []error
	var c converted
	if sy.Enabled != nil {
		c.base.Enabled = *sy.Enabled
		c.override.Enabled = sy.Enabled
	}
	if sy.DryRun != nil {
		c.base.DryRun = *sy.DryRun
		c.override.DryRun = sy.DryRun
	}
	if sy.Rules != nil {
		c.override.HasRules = true
		for i, ry := range *sy.Rules {
			r, rerrs := convertRule(fmt.Sprintf("%s.rules[%d]", where, i), ry)
			errs = append(errs, rerrs...)
			c.base.Rules = append(c.base.Rules, r)
		}
		c.override.Rules = c.base.Rules
	}
	if isDefault {
		c.base.Guard = DefaultGuard
		c.base.Remediation.MaxInFlight = DefaultMaxInFlight
	}
	k, pl, kerrs := convertRemediation(where, sy.Remediation)
	errs = append(errs, kerrs...)
	if k != nil {
		c.base.Remediation.MaxInFlight, c.override.MaxInFlight = *k, k
	}
	if pl != nil {
		c.base.Remediation.PerLabel, c.override.PerLabel = *pl, pl
	}
	if g := sy.Guard; g != nil {
		if g.MaxDevices != nil {
			c.base.Guard.MaxDevices = *g.MaxDevices
			c.override.Guard.MaxDevices = g.MaxDevices
		}
		if g.MaxPercent != nil {
			c.base.Guard.MaxPercent = *g.MaxPercent
			c.override.Guard.MaxPercent = g.MaxPercent
		}
		if g.Window != nil {
			d, err := time.ParseDuration(*g.Window)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.guard.window: %w", where, err))
			}
			c.base.Guard.Window = d
			c.override.Guard.Window = &d
		}
		if g.PerLabel != nil {
			ds, derrs := convertDomains(where, *g.PerLabel)
			errs = append(errs, derrs...)
			c.base.Domains, c.override.Domains = ds, &ds
		}
	}
	for i, wy := range sy.MaintenanceWindows {
		w, werrs := convertWindow(fmt.Sprintf("%s.maintenanceWindows[%d]", where, i), wy)
		errs = append(errs, werrs...)
		c.base.MaintenanceWindows = append(c.base.MaintenanceWindows, w)
	}
	c.override.MaintenanceWindows = c.base.MaintenanceWindows
	return c, errs
}

// statusList converts a rule's from or to list: empty means all of
// allowed; a status not in allowed is an error "<field>: "X" is not <what>"
// (the status is kept in the list all the same).
func statusList(field string, given []string, allowed []status.Status, what string) ([]status.Status, []error) {
	if len(given) == 0 {
		return allowed, nil
	}
	var out []status.Status
	var errs []error
	for _, s := range given {
		st := status.Status(s)
		if !slices.Contains(allowed, st) {
			errs = append(errs, fmt.Errorf("%s: %q is not %s", field, s, what))
		}
		out = append(out, st)
	}
	return out, errs
}

func convertRule(where string, ry ruleYAML) (Rule, []error) {
	var errs []error
	r := Rule{Name: ry.Name, Reasons: ry.Reasons, DryRun: ry.DryRun}
	if !nameRE.MatchString(ry.Name) {
		errs = append(errs, fmt.Errorf("%s.name %q: must be [a-z0-9-], 1-63 bytes", where, ry.Name))
	}
	var bad []error
	r.From, bad = statusList(where+".from", ry.From, OfferedStatuses, "a status offered to customers (AVAILABLE, ALLOCATED, IN_SERVICE)")
	errs = append(errs, bad...)
	r.To, bad = statusList(where+".to", ry.To, TriggerStatuses, "FAULTED or MAINTENANCE")
	errs = append(errs, bad...)
	r.Health, bad = convertHealth(where, ry.Health)
	errs = append(errs, bad...)
	r.Validation, bad = convertValidation(where, ry.Validation, ry)
	errs = append(errs, bad...)
	if r.Validation != nil {
		r.From, r.To = nil, nil // a validation rule matches no status change
	}
	r.Ladder, bad = convertLadder(where, ry.Remediation, ry.AutoReleaseAfter)
	errs = append(errs, bad...)
	r.Labels, bad = convertRuleLabels(where, ry.Labels)
	errs = append(errs, bad...)
	for _, rs := range ry.Reasons {
		if !reasonRE.MatchString(rs) {
			errs = append(errs, fmt.Errorf("%s.reasons: %q is not a CamelCase condition reason", where, rs))
		}
	}
	var err error
	if ry.HoldDown != "" {
		if r.HoldDown, err = time.ParseDuration(ry.HoldDown); err != nil {
			errs = append(errs, fmt.Errorf("%s.holdDown: %w", where, err))
		} else if r.HoldDown < 0 {
			errs = append(errs, fmt.Errorf("%s.holdDown %s is negative", where, r.HoldDown))
		}
	}
	if ry.AutoReleaseAfter != "" {
		if r.AutoReleaseAfter, err = time.ParseDuration(ry.AutoReleaseAfter); err != nil {
			errs = append(errs, fmt.Errorf("%s.autoReleaseAfter: %w", where, err))
		} else if r.AutoReleaseAfter <= 0 {
			errs = append(errs, fmt.Errorf("%s.autoReleaseAfter %s must be positive (omit it for operator release only)", where, r.AutoReleaseAfter))
		}
	}
	return r, errs
}

func convertWindow(where string, wy windowYAML) (Window, []error) {
	var errs []error
	w := Window{Name: wy.Name}
	var err error
	if w.Start, err = time.Parse(time.RFC3339, wy.Start); err != nil {
		errs = append(errs, fmt.Errorf("%s.start %q: not an RFC 3339 time", where, wy.Start))
	}
	if w.End, err = time.Parse(time.RFC3339, wy.End); err != nil {
		errs = append(errs, fmt.Errorf("%s.end %q: not an RFC 3339 time", where, wy.End))
	}
	if len(errs) == 0 && !w.End.After(w.Start) {
		errs = append(errs, fmt.Errorf("%s: end %s is not after start %s", where, wy.End, wy.Start))
	}
	switch wy.Recurrence {
	case "":
	case "daily":
		w.Every = 24 * time.Hour
	case "weekly":
		w.Every = 7 * 24 * time.Hour
	default:
		if w.Every, err = time.ParseDuration(wy.Recurrence); err != nil || w.Every <= 0 {
			errs = append(errs, fmt.Errorf("%s.recurrence %q: want daily, weekly or a positive duration such as 12h", where, wy.Recurrence))
		}
	}
	if w.Every > 0 && len(errs) == 0 && w.Every < w.End.Sub(w.Start) {
		errs = append(errs, fmt.Errorf("%s: recurrence %s is shorter than the window (%s)", where, w.Every, w.End.Sub(w.Start)))
	}
	for _, d := range wy.Devices {
		u, err := uuid.Parse(d)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.devices: %q is not a node UUID", where, d))
			continue
		}
		w.Devices = append(w.Devices, u.String())
	}
	w.Start, w.End = w.Start.UTC(), w.End.UTC()
	return w, errs
}

func checkEffective(where string, p SitePolicy) []error {
	var errs []error
	seen := map[string]bool{}
	for _, r := range p.Rules {
		if seen[r.Name] {
			errs = append(errs, fmt.Errorf("%s: rule name %q used twice", where, r.Name))
		}
		seen[r.Name] = true
	}
	g := p.Guard
	if g.MaxDevices < 1 {
		errs = append(errs, fmt.Errorf("%s.guard.maxDevices %d: must be at least 1", where, g.MaxDevices))
	}
	if !(g.MaxPercent > 0 && g.MaxPercent <= 100) {
		errs = append(errs, fmt.Errorf("%s.guard.maxPercent %g: must be in (0, 100]", where, g.MaxPercent))
	}
	if g.Window < time.Second {
		errs = append(errs, fmt.Errorf("%s.guard.window %s: must be at least 1s", where, g.Window))
	}
	if p.Enabled && len(p.Rules) == 0 {
		errs = append(errs, fmt.Errorf("%s: enabled without rules", where))
	}
	return errs
}

// String renders p in one line for logs.
func (p SitePolicy) String() string {
	names := make([]string, len(p.Rules))
	for i, r := range p.Rules {
		names[i] = r.Name
	}
	return fmt.Sprintf("enabled=%t dry_run=%t rules=[%s] guard=%d/%g%%/%s windows=%d", p.Enabled, p.DryRun,
		strings.Join(names, ","), p.Guard.MaxDevices, p.Guard.MaxPercent, p.Guard.Window, len(p.MaintenanceWindows))
}

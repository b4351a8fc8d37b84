package policy

import (
	"strings"
	"testing"
	"time"
)

const ladderDoc = `
policy:
  default:
    enabled: true
    remediation: {maxInFlight: 2}
    rules:
      - name: gpu-xid
        to: [FAULTED]
        remediation:
          steps:
            - {action: REBOOT, timeout: 10m, powerTimeout: 60s}
            - {action: REPROVISION, timeout: 1h}
          settle: 2m
          budget: {ladders: 3, window: 168h}
          release: automatic
  sites:
    site-b: {remediation: {maxInFlight: 5}}
`

func TestParseLadder(t *testing.T) {
	f, err := Parse([]byte(ladderDoc))
	if err != nil {
		t.Fatal(err)
	}
	a := f.Effective("site-a")
	l := a.Rules[0].Ladder
	if l == nil || len(l.Steps) != 2 || l.Steps[0].Kind != "REBOOT" || l.Steps[0].PowerTimeout != time.Minute ||
		l.Steps[1].Timeout != time.Hour || l.Settle != 2*time.Minute || l.Budget != (Budget{3, 168 * time.Hour}) ||
		l.Release != ReleaseAutomatic || len(l.HandoffOn) != 1 || l.HandoffOn[0] != 5 {
		t.Fatalf("ladder = %+v", l)
	}
	if a.Remediation.MaxInFlight != 2 || f.Effective("site-b").Remediation.MaxInFlight != 5 {
		t.Fatalf("maxInFlight a=%d b=%d", a.Remediation.MaxInFlight, f.Effective("site-b").Remediation.MaxInFlight)
	}
	if got := l.Describe(0); got != "REBOOT (step 1 of 2, timeout 10m0s)" {
		t.Errorf("Describe = %q", got)
	}
	if Disabled().Default.Remediation.MaxInFlight != DefaultMaxInFlight {
		t.Error("the disabled policy has no remediation limit")
	}
}

// A ladder with defaults only: budget 3 in 7 days, automatic release,
// settle 5m, hand off on CONTACT_SUPPORT.
func TestParseLadderDefaults(t *testing.T) {
	f, err := Parse([]byte(`
policy:
  default:
    enabled: true
    rules:
      - name: r
        remediation: {steps: [{action: REBOOT, timeout: 5m}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	l := f.Default.Rules[0].Ladder
	if l.Budget != DefaultBudget || l.Release != ReleaseAutomatic || l.Settle != DefaultSettle || l.HandoffOn[0] != 5 {
		t.Fatalf("defaults = %+v", l)
	}
}

// Every problem of a ladder is refused, naming its field.
func TestParseLadderNamesEveryProblem(t *testing.T) {
	doc := `
policy:
  default:
    enabled: true
    remediation: {maxInFlight: 0}
    rules:
      - name: r
        autoReleaseAfter: 5m
        remediation:
          steps:
            - {action: REFORMAT, timeout: 5m}
            - {action: REBOOT}
            - {action: POWER_ON, timeout: 5m, soft: true, powerTimeout: 2h}
            - {action: SET_MAINTENANCE, timeout: -1m}
            - {action: REBOOT, timeout: 48h, maintenanceReason: x}
          settle: soon
          budget: {ladders: 0, window: 1s}
          release: never
          handoffOn: [CALL_MUM]
`
	_, err := Parse([]byte(doc))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"default.remediation.maxInFlight 0",
		"default.rules[0].remediation: a rule with a ladder must not set autoReleaseAfter",
		`default.rules[0].remediation.steps[0].action "REFORMAT"`,
		"default.rules[0].remediation.steps[1].timeout: required",
		"default.rules[0].remediation.steps[2].soft: only for POWER_OFF and REBOOT",
		"default.rules[0].remediation.steps[2].powerTimeout 2h0m0s",
		"default.rules[0].remediation.steps[3].timeout -1m0s is negative",
		"default.rules[0].remediation.steps[3].maintenanceReason: required",
		"default.rules[0].remediation.steps[4].timeout 48h0m0s",
		"default.rules[0].remediation.steps[4].maintenanceReason: only for SET_MAINTENANCE",
		`default.rules[0].remediation.settle "soon"`,
		"default.rules[0].remediation.budget.ladders 0",
		"default.rules[0].remediation.budget.window 1s",
		`default.rules[0].remediation.release "never"`,
		`default.rules[0].remediation.handoffOn: "CALL_MUM"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	// An unknown key is refused too.
	if _, err := Parse([]byte(strings.Replace(doc, "settle: soon", "setle: 1m", 1))); err == nil || !strings.Contains(err.Error(), "setle") {
		t.Errorf("unknown key: %v", err)
	}
}

// remediation.perLabel: the failure-domain limits of ladders; a site's
// list replaces the default's, and every problem is named.
func TestParseRemediationPerLabel(t *testing.T) {
	f, err := Parse([]byte(`
policy:
  default:
    remediation:
      maxInFlight: 2
      perLabel:
        - {label: rack, maxInFlight: 1}
        - {label: power-feed, maxInFlight: 3}
  sites:
    site-b: {remediation: {perLabel: []}}
    site-c: {remediation: {maxInFlight: 4}}
`))
	if err != nil {
		t.Fatal(err)
	}
	a := f.Effective("site-a").Remediation
	if len(a.PerLabel) != 2 || a.PerLabel[0] != (LabelInFlight{"rack", 1}) || a.PerLabel[1] != (LabelInFlight{"power-feed", 3}) {
		t.Fatalf("site-a = %+v", a)
	}
	if b := f.Effective("site-b").Remediation; len(b.PerLabel) != 0 || b.MaxInFlight != 2 {
		t.Fatalf("site-b = %+v (its empty list replaces the default's)", b)
	}
	if c := f.Effective("site-c").Remediation; len(c.PerLabel) != 2 || c.MaxInFlight != 4 {
		t.Fatalf("site-c = %+v (keeps the default's list)", c)
	}
	_, err = Parse([]byte(`
policy:
  default:
    remediation:
      perLabel:
        - {label: "rack!", maxInFlight: 1}
        - {label: row, maxInFlight: 0}
        - {label: row, maxInFlight: 1}
`))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`default.remediation.perLabel[0].label "rack!"`,
		"default.remediation.perLabel[1].maxInFlight 0: want 1 to 10000",
		`default.remediation.perLabel[2].label "row": given twice`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

package policy

import (
	"strings"
	"testing"
)

// A ladder step may create a Nova server by a named template
// (reprovision a SLURM worker as one); NOVA_CREATE needs the template,
// no other kind takes one.
func TestParseLadderTemplateStep(t *testing.T) {
	f, err := Parse([]byte(`
policy:
  default:
    enabled: true
    rules:
      - name: r
        remediation:
          steps:
            - {action: REPROVISION, timeout: 1h}
            - {action: NOVA_CREATE, timeout: 1h, template: slurm-worker}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s := f.Default.Rules[0].Ladder.Steps[1]; s.Kind != "NOVA_CREATE" || s.Template != "slurm-worker" || s.Verb() != "nova create" {
		t.Fatalf("step = %+v (verb %q)", s, s.Verb())
	}
	_, err = Parse([]byte(`
policy:
  default:
    enabled: true
    rules:
      - name: r
        remediation:
          steps:
            - {action: NOVA_CREATE, timeout: 1h}
            - {action: REBOOT, timeout: 1h, template: slurm-worker}
`))
	for _, want := range []string{
		`default.rules[0].remediation.steps[0].template "": NOVA_CREATE needs the name of a Nova create template`,
		"default.rules[0].remediation.steps[1].template: only for NOVA_CREATE",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// A SLURM worker is reprovisioned as one by a ladder whose NOVA_DELETE and
// REPROVISION steps continue without the success test and whose
// NOVA_CREATE names the worker's template; continue on the last step is
// refused naming it.
func TestParseLadderContinueSteps(t *testing.T) {
	f, err := Parse([]byte(`
policy:
  default:
    enabled: true
    rules:
      - name: r
        remediation:
          steps:
            - {action: NOVA_DELETE, timeout: 30m, continue: true}
            - {action: REPROVISION, timeout: 1h, continue: true}
            - {action: NOVA_CREATE, timeout: 1h, template: slurm-worker}
`))
	if err != nil {
		t.Fatal(err)
	}
	steps := f.Default.Rules[0].Ladder.Steps
	if steps[0].Kind != "NOVA_DELETE" || !steps[0].Continue || !steps[1].Continue || steps[2].Continue || steps[0].Verb() != "nova delete" {
		t.Fatalf("steps = %+v", steps)
	}
	_, err = Parse([]byte(`
policy:
  default:
    enabled: true
    rules:
      - name: r
        remediation:
          steps:
            - {action: REBOOT, timeout: 1h, continue: true}
            - {action: REPROVISION, timeout: 1h, continue: true}
`))
	if want := "default.rules[0].remediation.steps[1].continue: the last step has no next step to continue with"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error lacks %q: %v", want, err)
	}
}

// A ladder acts on devices with a customer instance only when it says so.
func TestParseLadderActOnCustomerInstances(t *testing.T) {
	for _, c := range []struct {
		key  string
		want bool
	}{{"", false}, {"\n          actOnCustomerInstances: true", true}} {
		f, err := Parse([]byte(`
policy:
  default:
    enabled: true
    rules:
      - name: r
        remediation:
          steps:
            - {action: REBOOT, timeout: 1h}` + c.key + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Default.Rules[0].Ladder.ActOnCustomerInstances; got != c.want {
			t.Errorf("with %q: actOnCustomerInstances %v, want %v", c.key, got, c.want)
		}
	}
}

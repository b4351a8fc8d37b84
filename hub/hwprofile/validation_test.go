package hwprofile_test

import (
	"strings"
	"testing"

	"github.com/ironlink/ironlink/hub/hwprofile"
)

// A profile's validation.clean_steps are parsed with their arguments and
// returned for the devices it applies to; a bad interface, step name or
// unknown key is refused naming the line and the step.
func TestParseValidationCleanSteps(t *testing.T) {
	f, err := hwprofile.Parse([]byte(`profiles:
  - name: gpu-h100
    match: {resource_class: gpu-h100}
    validation:
      clean_steps:
        - {interface: deploy, step: burnin_cpu}
        - {interface: deploy, step: burnin_disk, args: {note: full}}
  - name: other
    match: {name: "x-*"}
`))
	if err != nil {
		t.Fatal(err)
	}
	steps := f.ValidationCleanSteps(hwprofile.Device{Site: "s", Name: "n1", ResourceClass: "gpu-h100"})
	if len(steps) != 2 || steps[0].GetInterface() != "deploy" || steps[0].GetStep() != "burnin_cpu" || steps[0].GetArgs() != nil ||
		steps[1].GetArgs().GetFields()["note"].GetStringValue() != "full" {
		t.Fatalf("gpu-h100 steps: %v", steps)
	}
	if s := f.ValidationCleanSteps(hwprofile.Device{Name: "x-1"}); s != nil {
		t.Errorf("a profile without validation gave %v", s)
	}
	if s := (*hwprofile.File)(nil).ValidationCleanSteps(hwprofile.Device{Name: "x-1"}); s != nil {
		t.Errorf("no file gave %v", s)
	}
	for _, c := range []struct{ yaml, says string }{
		{"        - {interface: Deploy, step: burnin_cpu}\n", `line 2: profiles[0] (p): validation.clean_steps[0].interface "Deploy" is not a driver interface`},
		{"        - {interface: deploy, step: burnin-cpu}\n", `validation.clean_steps[0].step "burnin-cpu" is not a step name`},
		{"        - {interface: deploy, step: burnin_cpu, priority: 5}\n", "field priority not found"},
	} {
		_, err := hwprofile.Parse([]byte("profiles:\n  - name: p\n    match: {resource_class: c}\n    validation:\n      clean_steps:\n" + c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%q: %v, want an error saying %q", c.yaml, err, c.says)
		}
	}
}

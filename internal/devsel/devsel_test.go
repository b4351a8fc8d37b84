package devsel

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// TestFormatParseRoundTrip: what Format writes, Parse reads back as the
// same selector, values with commas, '|', quotes and edge spaces
// included (a drift outlier's hw.cpu_model, a reason naming two causes).
func TestFormatParseRoundTrip(t *testing.T) {
	for _, sel := range []*ironlinkv1.DeviceSelector{
		{Site: "site-a", ResourceClass: "gpu-h100", HardwareFacts: map[string]string{"gpu_count": "7"}},
		{Site: "site-a", HardwareFacts: map[string]string{"cpu_model": "Intel(R) Xeon(R), rev 2", "nic": `a "quoted" | b`, "disk": " 960 GB "}},
		{Statuses: []ironlinkv1.OperationalStatus{ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED}, ConditionReasons: []string{"DeployFailed", "a|b"}},
		{Site: "s", NamePattern: "gpu-*", Labels: map[string]string{"rack": "r12"}},
	} {
		text := Format(sel)
		got, err := Parse(text, "--selector")
		if err != nil {
			t.Fatalf("Parse(Format(%v) = %q): %v", sel, text, err)
		}
		if !proto.Equal(got, sel) {
			t.Errorf("Parse(%q) = %v, want %v", text, got, sel)
		}
	}
}

// TestParseQuoted: quoted values keep their commas and '|'; a quote left
// open or a broken escape is refused naming the problem.
func TestParseQuoted(t *testing.T) {
	sel, err := Parse(`site=a, hw.cpu_model="Xeon, rev 2",reason="x|y"`, "--selector")
	if err != nil {
		t.Fatal(err)
	}
	if sel.GetHardwareFacts()["cpu_model"] != "Xeon, rev 2" || len(sel.GetConditionReasons()) != 1 || sel.GetConditionReasons()[0] != "x|y" {
		t.Fatalf("quoted values: %v", sel)
	}
	for in, want := range map[string]string{
		`site=a,hw.cpu="Xeon, rev`: "not closed",
		`site=a,hw.cpu="a\q"`:      "not a double-quoted string",
	} {
		if _, err := Parse(in, "--selector"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q): %v, want an error saying %q", in, err, want)
		}
	}
}

package labelsfile

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	f, err := Parse([]byte(`
other: ignored
labels:
  - site: site-a
    name: "gpu-r12-*"
    labels: {rack: r12, switch: s3}
  - device: 3F1C2A4E-0000-4000-8000-000000000001
    labels: {power-feed: pdu-b}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Entries) != 2 || f.Entries[0].NameLike != "gpu-r12-%" || f.Entries[0].Site != "site-a" ||
		f.Entries[1].DeviceID != "3f1c2a4e-0000-4000-8000-000000000001" || f.Entries[1].Labels["power-feed"] != "pdu-b" {
		t.Fatalf("entries %+v", f.Entries)
	}
	for _, tc := range []struct{ doc, want string }{
		{`policy: {}`, "no `labels` key"},
		{"labels:\n  - {site: a, name: '*', labels: {rack: 'r 1'}}", "labels[0].labels.rack"},
		{"labels:\n  - {site: a, name: '*'}", "labels[0]: no labels"},
		{"labels:\n  - {device: nope, labels: {rack: r1}}", "labels[0].device"},
		{"labels:\n  - {device: 3f1c2a4e-0000-4000-8000-000000000001, site: a, labels: {rack: r1}}", "not both"},
		{"labels:\n  - {site: a, labels: {rack: r1}}", "give device, or site and name"},
		{"labels:\n  - {site: A_B, name: x, labels: {rack: r1}}", "labels[0].site"},
		{"labels:\n  - {site: a, name: x, labels: {rack: r1}, colour: blue}", "colour"},
	} {
		_, err := Parse([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.doc, err, tc.want)
		}
	}
}

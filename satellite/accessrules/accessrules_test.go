package accessrules

import (
	"bytes"
	"os"
	"testing"
)

// The committed file must be exactly what the code's call tables render:
// a call missing from it, or a grant no code uses, fails here.
func TestFileMatchesCode(t *testing.T) {
	want, err := Render(Rules())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../deploy/openstack/access-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("deploy/openstack/access-rules.yaml is out of step with the code; regenerate it:\n  go run ./satellite/accessrules/cmd/render > deploy/openstack/access-rules.yaml\nwant:\n%s", want)
	}
}

// The operations credential's file must be exactly what the operations
// code's call table renders.
func TestOperationsFileMatchesCode(t *testing.T) {
	want, err := Render(OperationsRules())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../deploy/openstack/operations-access-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("deploy/openstack/operations-access-rules.yaml is out of step with satellite/operations; regenerate it:\n  go run ./satellite/accessrules/cmd/render -operations > deploy/openstack/operations-access-rules.yaml\nwant:\n%s", want)
	}
}

func TestAllows(t *testing.T) {
	tests := []struct {
		rule                  Rule
		service, method, path string
		want                  bool
	}{
		{Rule{"baremetal", "GET", "/v1/nodes"}, "baremetal", "GET", "/v1/nodes", true},
		{Rule{"baremetal", "GET", "/v1/nodes"}, "baremetal", "GET", "/v1/nodes/abc", false},
		{Rule{"baremetal", "GET", "/v1/nodes/*"}, "baremetal", "GET", "/v1/nodes/abc", true},
		{Rule{"baremetal", "GET", "/v1/nodes/*"}, "baremetal", "GET", "/v1/nodes/abc/traits", false},
		{Rule{"baremetal", "PUT", "/v1/nodes/{node_id}/traits/*"}, "baremetal", "PUT", "/v1/nodes/a/traits/CUSTOM_X", true},
		{Rule{"baremetal", "PUT", "/v1/nodes/*/traits/*"}, "baremetal", "DELETE", "/v1/nodes/a/traits/CUSTOM_X", false},
		{Rule{"baremetal", "GET", "/v1/**"}, "baremetal", "GET", "/v1/nodes/a/traits", true},
		{Rule{"placement", "GET", "/**"}, "baremetal", "GET", "/v1", false},
		{Rule{"placement", "GET", "/"}, "placement", "GET", "/", true},
	}
	for _, tc := range tests {
		if got := tc.rule.Allows(tc.service, tc.method, tc.path); got != tc.want {
			t.Errorf("%+v allows %s %s %s = %v, want %v", tc.rule, tc.service, tc.method, tc.path, got, tc.want)
		}
	}
}

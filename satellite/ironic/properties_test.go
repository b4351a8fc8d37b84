package ironic

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/ironlink/ironlink/satellite/openstack"
)

// The node listing asks for properties (every microversion has them) and
// decodes cpus, memory_mb, local_gb and cpu_arch only: numbers or numeric
// strings; a value of another shape is unknown, never a decode error that
// would fail the page; properties left out are Unsent, null or a non-object
// are sent with nothing known.
func TestDecodeProperties(t *testing.T) {
	if f, _ := Fields(openstack.Microversion{Major: 1, Minor: 1}); !slices.Contains(f, "properties") {
		t.Fatalf("fields at 1.1 %v lack properties", f)
	}
	asked := []string{"uuid", "properties"}
	for _, tc := range []struct {
		name, body string
		want       Properties
		unsent     bool
	}{
		{name: "numbers", body: `{"uuid":"u","properties":{"cpus":64,"memory_mb":524288,"local_gb":1800,"cpu_arch":"x86_64","capabilities":"boot_mode:uefi","root_device":{"serial":"s"}}}`,
			want: Properties{CPUs: 64, HasCPUs: true, MemoryMB: 524288, HasMemoryMB: true, LocalGB: 1800, HasLocalGB: true, CPUArch: "x86_64", HasCPUArch: true}},
		{name: "numeric strings", body: `{"uuid":"u","properties":{"cpus":"8","memory_mb":" 16384 ","local_gb":"0","cpu_arch":"aarch64"}}`,
			want: Properties{CPUs: 8, HasCPUs: true, MemoryMB: 16384, HasMemoryMB: true, LocalGB: 0, HasLocalGB: true, CPUArch: "aarch64", HasCPUArch: true}},
		{name: "odd values", body: `{"uuid":"u","properties":{"cpus":"many","memory_mb":-1,"local_gb":1.5,"cpu_arch":7}}`},
		{name: "nulls", body: `{"uuid":"u","properties":{"cpus":null,"memory_mb":null,"local_gb":"","cpu_arch":null}}`},
		{name: "cpus beyond uint32", body: `{"uuid":"u","properties":{"cpus":4294967296,"cpu_arch":"ppc64le"}}`,
			want: Properties{CPUArch: "ppc64le", HasCPUArch: true}},
		{name: "empty", body: `{"uuid":"u","properties":{}}`},
		{name: "null properties", body: `{"uuid":"u","properties":null}`},
		{name: "not an object", body: `{"uuid":"u","properties":"x"}`},
		{name: "left out", body: `{"uuid":"u"}`, unsent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w wireNode
			if err := json.Unmarshal([]byte(tc.body), &w); err != nil {
				t.Fatalf("decode failed (one odd node would fail its page): %v", err)
			}
			n := w.toNode(asked, nil)
			if n.Properties != tc.want {
				t.Errorf("Properties = %+v, want %+v", n.Properties, tc.want)
			}
			if n.Unsent["properties"] != tc.unsent {
				t.Errorf("Unsent = %v, want properties unsent %v", n.Unsent, tc.unsent)
			}
		})
	}
	// Left out after a read that had them: the last known values stay.
	prev := Node{UUID: "u", Properties: Properties{CPUs: 4, HasCPUs: true}}
	n := Node{UUID: "u", Unsent: map[string]bool{"properties": true}, Missing: map[string]bool{"properties": true}}
	if got := n.CarryUnsent(prev).Properties; got != prev.Properties {
		t.Errorf("CarryUnsent: %+v, want %+v", got, prev.Properties)
	}
}

package ironic

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

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

// BenchmarkDecodePageProperties decodes a listing page of 1,000 nodes with
// the properties Ironic holds after inspection and, in the same run, the
// same page without the properties key (the raw reference: what a poll
// cost before properties were asked for), and reports the ratio.
func BenchmarkDecodePageProperties(b *testing.B) {
	node := func(props bool) string {
		s := `{"uuid":"0eec9eed-782e-4645-afcd-37155ec7ff1a","name":"gpu-0001","provision_state":"active","target_provision_state":null,` +
			`"provision_updated_at":"2026-11-29T18:00:00+00:00","power_state":"power on","maintenance":false,"maintenance_reason":null,` +
			`"fault":null,"last_error":null,"instance_uuid":"1303e6fe-16bb-420d-b215-f69c12c254f3","allocation_uuid":null,` +
			`"resource_class":"gpu-h100","traits":["CUSTOM_GPU","CUSTOM_IRONLINK_READY"],"conductor_group":"","owner":"ops","lessee":"customer-1"`
		if props {
			s += `,"properties":{"cpus":112,"memory_mb":2097152,"local_gb":3576,"cpu_arch":"x86_64","capabilities":"boot_mode:uefi,cpu_vt:true",` +
				`"vendor":"Supermicro","root_device":{"serial":"S6B0NG0R123456"}}`
		}
		return s + "}"
	}
	page := func(props bool) []byte {
		var sb strings.Builder
		sb.WriteString(`{"nodes":[`)
		for i := range 1000 {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(node(props))
		}
		sb.WriteString(`]}`)
		return []byte(sb.String())
	}
	with, without := page(true), page(false)
	decode := func(body []byte) time.Duration {
		start := time.Now()
		p := listPage{Nodes: make([]wireNode, 0, 1000)}
		if err := json.Unmarshal(body, &p); err != nil || len(p.Nodes) != 1000 {
			b.Fatal(err)
		}
		for i := range p.Nodes {
			_ = p.Nodes[i].toNode(nil, nil)
		}
		return time.Since(start)
	}
	var tWith, tWithout time.Duration
	for b.Loop() {
		tWithout += decode(without)
		tWith += decode(with)
	}
	b.ReportMetric(float64(tWith)/float64(tWithout), "with/without")
	b.ReportMetric(float64(tWith)/float64(b.N)/1e6, "ms/page-with")
	b.ReportMetric(float64(tWithout)/float64(b.N)/1e6, "ms/page-without")
}

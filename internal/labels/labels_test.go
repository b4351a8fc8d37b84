package labels

import (
	"maps"
	"strings"
	"testing"
)

func TestParseMappingAndApply(t *testing.T) {
	m, err := ParseMapping("rack=extra.rack, row=properties.row,pod=conductor_group,tenant=owner")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.String(); got != "rack=extra.rack,row=properties.row,pod=conductor_group,tenant=owner" {
		t.Errorf("String() = %q", got)
	}
	fields := map[string]string{"extra.rack": "r12", "properties.row": "Row 4", "conductor_group": "", "owner": "p1"}
	set, bad := m.Apply(func(src string) (string, bool) { v, ok := fields[src]; return v, ok })
	if want := map[string]string{"rack": "r12", "tenant": "p1"}; !maps.Equal(set, want) || len(bad) != 1 || bad[0] != "row" {
		t.Errorf("Apply = %v, bad %v; want %v, bad [row] (a space is no label value; an empty field gives no label)", set, bad, want)
	}
	for _, text := range []string{"rack", "rack=extra.", "rack=driver_info.x", "rack=owner,rack=lessee", "-x=owner"} {
		if _, err := ParseMapping(text); err == nil {
			t.Errorf("ParseMapping(%q) accepted", text)
		}
	}
}

func TestCheck(t *testing.T) {
	if err := Check("labels", map[string]string{"rack": "r12", "power-feed": "pdu-a.2"}); err != nil {
		t.Error(err)
	}
	for _, set := range []map[string]string{{"rack": ""}, {"": "x"}, {"rack": "a b"}, {"rack": strings.Repeat("x", 64)}, {"ra\x00ck": "r"}} {
		if err := Check("labels", set); err == nil {
			t.Errorf("Check(%q) accepted", set)
		}
	}
	many := map[string]string{}
	for i := range MaxPerDevice + 1 {
		many["k"+strings.Repeat("x", i)] = "v"
	}
	if err := Check("labels", many); err == nil {
		t.Error("33 labels accepted")
	}
	if got := String(map[string]string{"row": "a", "rack": "r1"}); got != "rack=r1,row=a" {
		t.Errorf("String = %q", got)
	}
}

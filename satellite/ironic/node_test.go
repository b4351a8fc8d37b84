package ironic

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
)

// Decoding tells a field Ironic did not send from one it sent as null or
// "": only the first is Unsent (and Missing); null means "none" except for
// provision_state, maintenance and traits, where it means "cannot tell".
func TestDecodeTellsAbsentFromNullFromEmpty(t *testing.T) {
	asked := []string{"uuid", "provision_state", "maintenance", "maintenance_reason", "fault", "last_error", "lessee", "traits"}
	for _, tc := range []struct {
		name        string
		body        string
		unsent      []string
		missing     []string
		fault, ps   string
		maintenance bool
	}{
		{name: "all sent", body: `{"uuid":"u","provision_state":"available","maintenance":true,"maintenance_reason":"r","fault":"power failure","last_error":"e","lessee":"p","traits":[]}`,
			fault: "power failure", ps: "available", maintenance: true},
		{name: "nulls are values", body: `{"uuid":"u","provision_state":"available","maintenance":false,"maintenance_reason":null,"fault":null,"last_error":null,"lessee":null,"traits":[]}`,
			ps: "available"},
		{name: "empty strings are values", body: `{"uuid":"u","provision_state":"available","maintenance":false,"maintenance_reason":"","fault":"","last_error":"","lessee":"","traits":[]}`,
			ps: "available"},
		{name: "absent fields are unsent", body: `{"uuid":"u","provision_state":"available","maintenance":true}`,
			unsent:  []string{"fault", "last_error", "lessee", "maintenance_reason", "traits"},
			missing: []string{"fault", "last_error", "lessee", "maintenance_reason", "traits"}, ps: "available", maintenance: true},
		{name: "null where null means cannot tell", body: `{"uuid":"u","provision_state":null,"maintenance":null,"maintenance_reason":"","fault":"","last_error":"","lessee":"","traits":null}`,
			missing: []string{"maintenance", "provision_state", "traits"}},
		{name: "absent required fields", body: `{"uuid":"u","maintenance_reason":"","fault":"","last_error":"","lessee":"","traits":[]}`,
			unsent: []string{"maintenance", "provision_state"}, missing: []string{"maintenance", "provision_state"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w wireNode
			if err := json.Unmarshal([]byte(tc.body), &w); err != nil {
				t.Fatal(err)
			}
			n := w.toNode(asked, nil)
			if got := slices.Sorted(maps.Keys(n.Unsent)); !slices.Equal(got, tc.unsent) {
				t.Errorf("Unsent = %v, want %v", got, tc.unsent)
			}
			if got := slices.Sorted(maps.Keys(n.Missing)); !slices.Equal(got, tc.missing) {
				t.Errorf("Missing = %v, want %v", got, tc.missing)
			}
			if n.Fault != tc.fault || n.ProvisionState != tc.ps || n.Maintenance != tc.maintenance {
				t.Errorf("fault %q state %q maintenance %v", n.Fault, n.ProvisionState, n.Maintenance)
			}
		})
	}
}

// CarryUnsent keeps the last known value of an unsent field, also across
// several reads that lack it, and leaves sent fields alone.
func TestCarryUnsent(t *testing.T) {
	first := Node{UUID: "u", Fault: "power failure", Lessee: "p", Traits: []string{"CUSTOM_X"}, Maintenance: true}
	second := Node{UUID: "u", Maintenance: true, Unsent: map[string]bool{"fault": true, "lessee": true, "traits": true},
		Missing: map[string]bool{"fault": true, "lessee": true, "traits": true}}
	got := second.CarryUnsent(first)
	if got.Fault != "power failure" || got.Lessee != "p" || !got.HasTrait("CUSTOM_X") || !got.Unsent["fault"] {
		t.Fatalf("carried %+v", got)
	}
	third := Node{UUID: "u", Maintenance: true, Lessee: "q", Unsent: map[string]bool{"fault": true}, Missing: map[string]bool{"fault": true}}
	got = third.CarryUnsent(got)
	if got.Fault != "power failure" || got.Lessee != "q" {
		t.Fatalf("second carry %+v", got)
	}
	other := Node{UUID: "v", Unsent: map[string]bool{"fault": true}, Missing: map[string]bool{"fault": true}}
	if got := other.CarryUnsent(first); got.Fault != "" {
		t.Fatalf("carried from another node: %+v", got)
	}
}

// The fast path of a string field decodes exactly as encoding/json does,
// escapes, invalid UTF-8 and null included.
func TestOptStringAsJSON(t *testing.T) {
	for _, raw := range []string{`"plain"`, `""`, `"caf\u00e9"`, `"tab\there"`, `"nul\u0000"`, "\"bad\xffutf8\"", `"quote\"d"`, `"é"`, `null`} {
		var o optString
		if err := o.UnmarshalJSON([]byte(raw)); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		var want *string
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if (want == nil) != o.Null || (want != nil && *want != o.V) || !o.Set {
			t.Errorf("%s: decoded %+v, encoding/json %v", raw, o, want)
		}
	}
}

package ironic

import (
	"maps"
	"testing"
)

// TestScalars: a node's extra keeps strings, numbers as written and
// booleans; objects, lists and nulls are not labels; a non-object is
// nothing.
func TestScalars(t *testing.T) {
	got := scalars([]byte(`{"rack": "r12", "row": 7, "u": 12.5, "hot": true, "nested": {"a": 1}, "list": [1], "gone": null}`))
	want := map[string]string{"rack": "r12", "row": "7", "u": "12.5", "hot": "true"}
	if !maps.Equal(got, want) {
		t.Errorf("scalars = %v, want %v", got, want)
	}
	for _, raw := range []string{`null`, `[1]`, `"x"`, ``, `{bad`} {
		if got := scalars([]byte(raw)); got != nil {
			t.Errorf("scalars(%q) = %v, want nil", raw, got)
		}
	}
	var w wireNode
	if err := w.Extra.UnmarshalJSON([]byte(`{"rack":"r1"}`)); err != nil || !w.Extra.Set || w.Extra.V["rack"] != "r1" {
		t.Errorf("optScalars: %+v %v", w.Extra, err)
	}
}

package feed_test

import (
	"errors"
	"testing"

	"github.com/ironlink/ironlink/hub/store/feed"
)

// TestParseCursorChecksEveryField: every field of XID.SOURCE.ID is checked,
// and the refusal names the field.
func TestParseCursorChecksEveryField(t *testing.T) {
	for _, c := range []struct{ in, field string }{
		{"864.9.0", "SOURCE"}, // the cursor: an unknown middle field
		{"864.8.1", "SOURCE"},
		{"864.65536.1", "SOURCE"},
		{"864.0.5", "ID"},
		{"864.1.0", "ID"},
		{"864.1.9223372036854775808", "ID"},
		{"x.1.1", "XID"},
		{"-1.1.1", "XID"},
		{"+1.1.1", "XID"},
		{"0864.1.1", "XID"},
		{"864.01.1", "SOURCE"},
		{"864.1.01", "ID"},
		{".1.1", "XID"},
		{"864..1", "SOURCE"},
		{"864.1.", "ID"},
		{"864.1.-3", "ID"},
		{"18446744073709551616.1.1", "XID"},
		{"864.1", ""},
		{"864.1.1.1", ""},
		{"", ""},
	} {
		_, err := feed.ParseCursor(c.in)
		var ce *feed.CursorError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("ParseCursor(%q) = %v, want a refusal of field %q", c.in, err, c.field)
		}
	}
	for _, ok := range []feed.Cursor{{}, {XID: 864}, {XID: 864, Source: 1, ID: 1}, {XID: 1<<64 - 1, Source: 5, ID: 1<<63 - 1}} {
		if back, err := feed.ParseCursor(ok.String()); err != nil || back != ok {
			t.Errorf("round trip %s: %v, %v", ok, back, err)
		}
	}
}

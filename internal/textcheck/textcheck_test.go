package textcheck_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ironlink/ironlink/internal/textcheck"
)

func TestLineAndText(t *testing.T) {
	tests := []struct {
		name      string
		s         string
		max       int
		multiline bool
		want      string // reason; "" = accepted
	}{
		{"empty", "", 10, false, ""},
		{"plain", "GPU 3 throws Xid 79", 64, false, ""},
		{"tab in a line", "a\tb", 10, false, ""},
		{"unicode", "Grafikkarte überhitzt – 90 °C", 64, false, ""},
		{"bidi mark is text", "a\u200fb", 10, false, ""},
		{"exactly the limit", "abcd", 4, false, ""},
		{"one over the limit", "abcde", 4, false, textcheck.ReasonTooLong},
		{"NUL", "Xid\x0079", 64, false, textcheck.ReasonControlChar},
		{"NUL in text", "Xid\x0079", 64, true, textcheck.ReasonControlChar},
		{"newline in a line", "a\nb", 10, false, textcheck.ReasonControlChar},
		{"newline in text", "a\nb", 10, true, ""},
		{"carriage return in text", "a\r\nb", 10, true, textcheck.ReasonControlChar},
		{"escape", "\x1b[2J", 10, true, textcheck.ReasonControlChar},
		{"DEL", "a\x7f", 10, false, textcheck.ReasonControlChar},
		{"C1 control", "a\u0085", 10, true, textcheck.ReasonControlChar},
		{"invalid UTF-8", "\xff\xfe", 10, false, textcheck.ReasonInvalidUTF8},
		{"truncated rune", "ab\xc3", 10, true, textcheck.ReasonInvalidUTF8},
		{"encoded surrogate", "\xed\xa0\x80", 10, false, textcheck.ReasonInvalidUTF8},
		{"too long wins over NUL", strings.Repeat("\x00", 11), 10, false, textcheck.ReasonTooLong},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			check := textcheck.Line
			if tc.multiline {
				check = textcheck.Text
			}
			err := check("batch.devices[3].name", tc.s, tc.max)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var te *textcheck.Error
			if !errors.As(err, &te) {
				t.Fatalf("got %v, want a *textcheck.Error", err)
			}
			if te.Reason != tc.want || te.Field != "batch.devices[3].name" {
				t.Fatalf("reason %s field %s, want %s", te.Reason, te.Field, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "batch.devices[3].name ") || !utf8.ValidString(err.Error()) {
				t.Fatalf("message %q does not name the field or is not UTF-8", err.Error())
			}
		})
	}
}

// TestErrorNeverEchoesTheValue: a 1 MB value is refused with a short message,
// whatever the problem.
func TestErrorNeverEchoesTheValue(t *testing.T) {
	big := strings.Repeat("A", 1<<20)
	tests := []struct {
		name, s string
		max     int
	}{
		{"too long", big, 36},
		{"NUL at the end", big + "\x00", 2 << 20},
		{"invalid UTF-8 at the end", big + "\xff", 2 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := textcheck.Text("reason", tc.s, tc.max)
			if err == nil {
				t.Fatal("accepted")
			}
			if len(err.Error()) > 200 {
				t.Fatalf("message is %d bytes", len(err.Error()))
			}
		})
	}
}

func TestPrefix(t *testing.T) {
	tests := []struct {
		name string
		s    string
		max  int
		want string
	}{
		{"short stays", "site-a", 64, "site-a"},
		{"exact stays", "abcd", 4, "abcd"},
		{"cut with length", "abcdefgh", 4, "abcd…(8 bytes)"},
		{"cut on a rune boundary", "aé" + "zzzz", 2, "a…(7 bytes)"},
		{"invalid UTF-8 replaced", "a\xffb", 64, "a\uFFFDb"},
		{"all continuation bytes", strings.Repeat("\x80", 10), 4, "\uFFFD…(10 bytes)"},
		{"empty", "", 4, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := textcheck.Prefix(tc.s, tc.max)
			if got != tc.want {
				t.Fatalf("Prefix(%q, %d) = %q, want %q", tc.s, tc.max, got, tc.want)
			}
			if !utf8.ValidString(got) || len(got) > 3*tc.max+22 {
				t.Fatalf("result %q invalid or too long", got)
			}
		})
	}
	if q := textcheck.Quote(strings.Repeat("x", 1<<20) + "\x00"); len(q) > textcheck.EchoBytes+30 || !strings.HasSuffix(q, `…(1048577 bytes)"`) {
		t.Fatalf("Quote = %q", q)
	}
}

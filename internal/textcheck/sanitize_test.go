package textcheck

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// What the satellite relays from Ironic: each refused character is
// replaced as documented, and the result is accepted by the hub's check.
func TestSanitize(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        string
		max       int
		line      string
		text      string
		unchanged bool
	}{
		{name: "clean passes unchanged", in: "deploy failed: timeout\twaiting", max: 64,
			line: "deploy failed: timeout\twaiting", text: "deploy failed: timeout\twaiting", unchanged: true},
		{name: "NUL", in: "bmc\x00down", max: 64, line: "bmc\uFFFDdown", text: "bmc\uFFFDdown"},
		{name: "newline and CRLF", in: "Traceback:\r\n  File x\rline", max: 64,
			line: "Traceback:   File x line", text: "Traceback:\n  File x\nline"},
		{name: "C1 and DEL", in: "a\u0085b\x7fc", max: 64, line: "a\uFFFDb\uFFFDc", text: "a\uFFFDb\uFFFDc"},
		{name: "invalid UTF-8", in: "ok\xffno", max: 64, line: "ok\uFFFDno", text: "ok\uFFFDno"},
		{name: "too long is cut with an ellipsis", in: strings.Repeat("é", 10), max: 8, line: "éé…", text: "éé…"},
		{name: "cut after replacing", in: "\x00\x00\x00\x00", max: 7, line: "\uFFFD…", text: "\uFFFD…"},
		{name: "tiny limit", in: "abcdef", max: 2, line: "ab", text: "ab"},
		{name: "zero limit", in: "abc", max: 0, line: "", text: ""},
	} {
		if got := SanitizeLine(tc.in, tc.max); got != tc.line {
			t.Errorf("%s: SanitizeLine(%q, %d) = %q, want %q", tc.name, tc.in, tc.max, got, tc.line)
		}
		if got := SanitizeText(tc.in, tc.max); got != tc.text {
			t.Errorf("%s: SanitizeText(%q, %d) = %q, want %q", tc.name, tc.in, tc.max, got, tc.text)
		}
		if tc.unchanged {
			if n := testing.AllocsPerRun(10, func() { _ = SanitizeText(tc.in, tc.max) }); n != 0 {
				t.Errorf("%s: clean value cost %v allocations", tc.name, n)
			}
		}
	}
}

// Whatever bytes come in, the hub's check accepts what comes out.
func TestSanitizedIsAccepted(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0, 1, '\t', '\n', '\r', 0x1f, 0x7f, 0xc2, 0x85, 0x9f, 0xe2, 0x80, 0xa6, 0xff, 'a', 'z', ' '}
	for range 20000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		max := r.IntN(20)
		s := string(b)
		if max > 0 {
			if err := Line("f", SanitizeLine(s, max), max); err != nil {
				t.Fatalf("SanitizeLine(%q, %d) = %q refused: %v", s, max, SanitizeLine(s, max), err)
			}
			if err := Text("f", SanitizeText(s, max), max); err != nil {
				t.Fatalf("SanitizeText(%q, %d) = %q refused: %v", s, max, SanitizeText(s, max), err)
			}
		}
	}
}

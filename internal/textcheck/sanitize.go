package textcheck

import (
	"strings"
	"unicode/utf8"
)

// SanitizeLine returns s made acceptable to Line at max bytes, for a
// sender (the satellite) that relays text it does not control — Ironic's
// node names, fault and project fields — and must never send what the hub
// refuses (it would resend the refused batch for ever): invalid UTF-8
// becomes U+FFFD, tab is kept, newline, CRLF and carriage return become a
// space, every other control character (NUL, C0, DEL, C1; see IsControl)
// becomes U+FFFD, and a result longer than max is cut at a rune boundary and ends
// in "…" (when max leaves room for it). A value Line accepts is returned
// unchanged, without allocating. max ≤ 0 returns "".
func SanitizeLine(s string, max int) string { return sanitize(s, max, false) }

// SanitizeText is SanitizeLine for free text (Text): newline is kept, a
// carriage return followed by a newline is dropped and a lone carriage
// return becomes a newline (CRLF and old Mac line ends read as lines);
// everything else as SanitizeLine. Used for condition messages built from
// Ironic's last_error and maintenance_reason and for command results.
func SanitizeText(s string, max int) string { return sanitize(s, max, true) }

func sanitize(s string, max int, multiline bool) string {
	if max <= 0 {
		return ""
	}
	if check("", s, max, multiline) == nil {
		return s
	}
	var b strings.Builder
	b.Grow(min(len(s), max))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			r = utf8.RuneError
		case r == '\t':
		case r == '\r' && i+1 < len(s) && s[i+1] == '\n':
			i += n // CRLF: the newline that follows stands for both
			continue
		case r == '\r' && multiline:
			r = '\n'
		case r == '\n' && multiline:
		case r == '\r' || r == '\n':
			r = ' '
		case IsControl(r):
			r = utf8.RuneError
		}
		b.WriteRune(r)
		i += n
	}
	return cut(b.String(), max)
}

// ellipsis marks a value cut to its limit.
const ellipsis = "…"

// cut shortens valid UTF-8 s to at most max bytes at a rune boundary,
// ending in ellipsis when it cut something and max leaves room for it.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	keep := max
	if max > len(ellipsis) {
		keep = max - len(ellipsis)
	}
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	if max > len(ellipsis) {
		return s[:keep] + ellipsis
	}
	return s[:keep]
}

package textcheck

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Stable reasons of an *Error (UPPER_SNAKE, used as google.rpc.ErrorInfo
// reasons by hub/grpcerr; never renamed).
const (
	// ReasonTooLong: the value is longer than its limit.
	ReasonTooLong = "FIELD_TOO_LONG"
	// ReasonInvalidUTF8: the value is not valid UTF-8.
	ReasonInvalidUTF8 = "INVALID_UTF8"
	// ReasonControlChar: the value holds a NUL byte or another control
	// character that the field does not accept.
	ReasonControlChar = "CONTROL_CHARACTER"
)

// EchoBytes is how much of a value the hub echoes in an error reply or a
// log line (see Prefix).
const EchoBytes = 64

// Error is a refused value.
type Error struct {
	// Field is the proto path of the value, e.g. "reason" or
	// "batch.devices[3].device_id".
	Field string
	// Reason is one of the Reason* constants.
	Reason string
	// Detail says what is wrong, without the value itself beyond a Prefix,
	// e.g. "is 1048576 bytes, limit 1024".
	Detail string
}

// Error returns "<field> <detail>", e.g. "reason contains control
// character U+0000 (NUL) at byte 3".
func (e *Error) Error() string { return e.Field + " " + e.Detail }

// Line checks a one-line value (an id, a name, a version) of at most max
// bytes: valid UTF-8 and no control character but tab. An empty value
// passes (callers that require one say so themselves). It returns nil or an
// *Error for field.
func Line(field, s string, max int) error { return check(field, s, max, false) }

// Text checks free text (a reason, a message) of at most max bytes: like
// Line, and newline is accepted too.
func Text(field, s string, max int) error { return check(field, s, max, true) }

func check(field, s string, max int, multiline bool) error {
	if len(s) > max {
		return &Error{Field: field, Reason: ReasonTooLong, Detail: fmt.Sprintf("is %d bytes, limit %d", len(s), max)}
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return &Error{Field: field, Reason: ReasonInvalidUTF8, Detail: fmt.Sprintf("is not valid UTF-8 (byte 0x%02x at offset %d)", s[i], i)}
		}
		if IsControl(r) && r != '\t' && !(multiline && r == '\n') {
			return &Error{Field: field, Reason: ReasonControlChar, Detail: fmt.Sprintf("contains control character %s at byte %d%s", runeName(r), i, allowed(multiline))}
		}
		i += n
	}
	return nil
}

// IsControl reports whether r is a C0 control (U+0000-U+001F), DEL
// (U+007F) or a C1 control (U+0080-U+009F); tab and newline included.
func IsControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r <= 0x9f) }

func runeName(r rune) string {
	s := fmt.Sprintf("U+%04X", r)
	switch r {
	case 0:
		s += " (NUL)"
	case '\r':
		s += " (carriage return)"
	case '\n':
		s += " (newline)"
	}
	return s
}

func allowed(multiline bool) string {
	if multiline {
		return "; only tab and newline are accepted"
	}
	return "; only tab is accepted in a one-line value"
}

// Prefix returns s for echoing in an error reply or a log line: s itself
// when it is at most max bytes, else its first at most max bytes (cut at a
// rune boundary) followed by "…(N bytes)" with N the length of s. Invalid
// UTF-8 becomes U+FFFD, so the result is always valid UTF-8 (a gRPC status
// with details must be). Control characters are kept: quote the result
// (%q, Quote, or slog, which quotes) when it goes into a message. The
// result is at most 3·max + 22 bytes (a replaced byte takes 3).
func Prefix(s string, max int) string {
	if len(s) <= max {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	cut := max
	for back := 0; cut > 0 && back < utf8.UTFMax-1 && !utf8.RuneStart(s[cut]); back++ {
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "\uFFFD") + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// Quote is strconv.Quote(Prefix(s, EchoBytes)): the form in which the hub
// names a user-supplied value in an error message, e.g.
// `site "aaaa…(1048576 bytes)" is not a valid site name`.
func Quote(s string) string { return strconv.Quote(Prefix(s, EchoBytes)) }

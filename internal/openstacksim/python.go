package openstacksim

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// How the Python services format values, quote strings and word their
// validation messages.

// pyJSON encodes like Python's json.dumps with its default separators
// (", " and ": "), as Nova's bodies are; keys are sorted.
func pyJSON(v any) []byte {
	b, err := marshalJSON(v)
	if err != nil {
		return []byte(`{}`)
	}
	out := make([]byte, 0, len(b)+len(b)/8)
	inStr, esc := false, false
	for _, ch := range b {
		out = append(out, ch)
		switch {
		case inStr && esc:
			esc = false
		case inStr && ch == '\\':
			esc = true
		case ch == '"':
			inStr = !inStr
		case !inStr && (ch == ',' || ch == ':'):
			out = append(out, ' ')
		}
	}
	return out
}

// pyQuote quotes s as Python's json.dumps does (ensure_ascii: non-ASCII as
// \uXXXX escapes, surrogate pairs above the BMP).
func pyQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || (r >= 0x80 && r <= 0xffff):
			fmt.Fprintf(&b, `\u%04x`, r)
		case r > 0xffff:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// pyTime formats t like Python's datetime.isoformat() for an aware UTC
// datetime: microseconds only when non-zero, "+00:00" offset; zero → nil.
func pyTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	if t.Nanosecond()/1000 == 0 {
		return t.Format("2006-01-02T15:04:05+00:00")
	}
	return t.Format("2006-01-02T15:04:05.000000+00:00")
}

// pyRepr renders a value as Python's repr() does (dicts with sorted keys).
func pyRepr(v any) string {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, "'"+k+"': "+pyRepr(x[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case string:
		return "'" + x + "'"
	case nil:
		return "None"
	default:
		return fmt.Sprint(x)
	}
}

// pyBool is oslo strutils.bool_from_string(strict=True).
func pyBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "t", "true", "on", "y", "yes":
		return true, nil
	case "0", "f", "false", "off", "n", "no":
		return false, nil
	}
	//lint:ignore ST1005 Nova's own message, word for word
	return false, fmt.Errorf("Unrecognized value '%s', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'", s)
}

// boolRepr is Python's repr() of a bool.
func boolRepr(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// additionalProperties is jsonschema's message for unexpected keys,
// "Additional properties are not allowed ('a', 'b' were unexpected)".
func additionalProperties(keys []string) string {
	quoted := make([]string, 0, len(keys))
	for _, k := range keys {
		quoted = append(quoted, "'"+k+"'")
	}
	sort.Strings(quoted)
	verb := "was"
	if len(quoted) > 1 {
		verb = "were"
	}
	return fmt.Sprintf("Additional properties are not allowed (%s %s unexpected)", strings.Join(quoted, ", "), verb)
}

// Package healthcheck is the one check of a health event's text that both
// doors run before anything is written or spooled: the hub's
// HealthService (hub/healthapi) and the satellite's local NVSentinel door
// (satellite/healthdoor), so the two refuse the same events naming the
// same field (docs/reference/health.md "Errors"). It checks lengths,
// UTF-8, control characters (NUL included) and bidirectional controls
// (U+202E and its kin, which reorder what a terminal or a page shows), the
// name alphabet and the list sizes (Event), the generated time
// (GeneratedTime) and the form of a device id (DeviceID); which device
// field is required and the TTL are each door's own.
package healthcheck

import (
	"fmt"
	"maps"
	"slices"
	"time"
	"unicode"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// Limits of one health event (docs/reference/health.md "One event"), in
// bytes or items.
const (
	// MaxEventIDBytes is the longest event id.
	MaxEventIDBytes = 128
	// MaxNameBytes is the longest device id, device name or node name.
	MaxNameBytes = 255
	// MaxListItems is the most error codes, impacted entities or metadata
	// entries of one event.
	MaxListItems = 32
	// MaxCodeBytes is the longest error code, entity type or metadata key.
	MaxCodeBytes = 64
	// MaxValueBytes is the longest entity value or metadata value.
	MaxValueBytes = 256
	// MaxAge is how far before the door's clock a generated time may be:
	// an older one (a checker's clock at the epoch, a zero timestamp) is
	// refused, not stored.
	MaxAge = 7 * 24 * time.Hour
)

// Reason* are the stable reasons of an *Error besides textcheck's
// (FIELD_TOO_LONG, INVALID_UTF8, CONTROL_CHARACTER).
const (
	// ReasonInvalidValue: a name outside its alphabet or a list over its
	// size (hub/grpcerr.ReasonInvalidValue).
	ReasonInvalidValue = "INVALID_VALUE"
)

// Error is a refused field of event i: Field is its path
// ("events[3].entities_impacted[0].entity_value"), Reason a stable reason
// (textcheck's or ReasonInvalidValue), Detail what is wrong without the
// value beyond a textcheck.Prefix.
type Error struct {
	Field, Reason, Detail string
}

// Error returns "<field> <detail>".
func (e *Error) Error() string { return e.Field + " " + e.Detail }

// Event checks every string of event i of a batch (e): event_id,
// device_id, device_name, node_name (at most MaxNameBytes, one line),
// agent, component_class, check_name (1 to 64 of [A-Za-z0-9_.-], the
// first a letter or digit), message (free text, condition.MaxMessageBytes), each error code, each
// impacted entity's type and value, each metadata key and value, and the
// list sizes. The first problem in that order is returned as an *Error;
// nil when all pass. No string may hold a bidirectional control
// (IsBidiControl). Empty values pass except the three names (each door
// checks which device field is required).
func Event(i int, e *ironlinkv1.HealthEvent) error {
	f := func(name string) string { return fmt.Sprintf("events[%d].%s", i, name) }
	lines := []struct {
		name string
		v    string
		max  int
	}{
		{"event_id", e.GetEventId(), MaxEventIDBytes}, {"device_id", e.GetDeviceId(), MaxNameBytes},
		{"device_name", e.GetDeviceName(), MaxNameBytes}, {"node_name", e.GetNodeName(), MaxNameBytes},
		{"agent", e.GetAgent(), condition.MaxHealthNameBytes}, {"component_class", e.GetComponentClass(), condition.MaxHealthNameBytes},
		{"check_name", e.GetCheckName(), condition.MaxHealthNameBytes},
	}
	for _, l := range lines {
		if err := line(f(l.name), l.v, l.max); err != nil {
			return err
		}
	}
	for _, n := range []struct{ name, v string }{{"agent", e.GetAgent()}, {"component_class", e.GetComponentClass()}, {"check_name", e.GetCheckName()}} {
		if !condition.ValidHealthName(n.v) {
			return &Error{Field: f(n.name), Reason: ReasonInvalidValue,
				Detail: fmt.Sprintf("must be 1 to %d ASCII letters, digits, '_', '-' or '.'", condition.MaxHealthNameBytes)}
		}
	}
	if err := text(f("message"), e.GetMessage(), condition.MaxMessageBytes); err != nil {
		return err
	}
	return lists(f, e)
}

// lists checks the error codes, impacted entities and metadata of an
// event: their sizes, then each string.
func lists(f func(string) string, e *ironlinkv1.HealthEvent) error {
	for _, l := range []struct {
		name string
		n    int
	}{{"error_codes", len(e.GetErrorCodes())}, {"entities_impacted", len(e.GetEntitiesImpacted())}, {"metadata", len(e.GetMetadata())}} {
		if l.n > MaxListItems {
			return &Error{Field: f(l.name), Reason: ReasonInvalidValue, Detail: fmt.Sprintf("has %d items, at most %d", l.n, MaxListItems)}
		}
	}
	for j, c := range e.GetErrorCodes() {
		if err := line(f(fmt.Sprintf("error_codes[%d]", j)), c, MaxCodeBytes); err != nil {
			return err
		}
	}
	for j, x := range e.GetEntitiesImpacted() {
		if err := line(f(fmt.Sprintf("entities_impacted[%d].entity_type", j)), x.GetEntityType(), MaxCodeBytes); err != nil {
			return err
		}
		if err := line(f(fmt.Sprintf("entities_impacted[%d].entity_value", j)), x.GetEntityValue(), MaxValueBytes); err != nil {
			return err
		}
	}
	md := e.GetMetadata()
	for _, k := range slices.Sorted(maps.Keys(md)) {
		// A bad key cannot name its own path: the field is the map.
		if err := line(f("metadata"), k, MaxCodeBytes); err != nil {
			err.(*Error).Detail = "key " + err.(*Error).Detail
			return err
		}
		if err := line(f(fmt.Sprintf("metadata[%q]", k)), md[k], MaxValueBytes); err != nil {
			return err
		}
	}
	return nil
}

// line is textcheck.Line as an *Error (nil when the value passes), with
// bidirectional controls refused too.
func line(field, v string, max int) error {
	if err := fromText(textcheck.Line(field, v, max)); err != nil {
		return err
	}
	return bidi(field, v)
}

// text is textcheck.Text as an *Error, with bidirectional controls refused
// too.
func text(field, v string, max int) error {
	if err := fromText(textcheck.Text(field, v, max)); err != nil {
		return err
	}
	return bidi(field, v)
}

// bidi refuses a bidirectional control character in v (reason
// CONTROL_CHARACTER): U+061C, U+200E, U+200F, U+202A-U+202E and
// U+2066-U+2069. Printed raw they reorder the text around them in a
// terminal or a page ("Trojan Source").
func bidi(field, v string) error {
	for i, r := range v {
		if IsBidiControl(r) {
			return &Error{Field: field, Reason: textcheck.ReasonControlChar,
				Detail: fmt.Sprintf("contains bidirectional control character U+%04X at byte %d", r, i)}
		}
	}
	return nil
}

// IsBidiControl reports whether r is a bidirectional control character:
// Unicode's Bidi_Control property (unicode.Bidi_Control: U+061C, U+200E,
// U+200F, U+202A-U+202E, U+2066-U+2069).
func IsBidiControl(r rune) bool { return unicode.Is(unicode.Bidi_Control, r) }

// GeneratedTime checks the generated time of event i against the door's
// clock now: missing, not a valid timestamp, or more than MaxAge before
// now is an *Error naming events[i].generated_time; a time after now is
// returned as now with clamped true (the hub counts it). at is in UTC.
func GeneratedTime(i int, ts *timestamppb.Timestamp, now time.Time) (at time.Time, clamped bool, err error) {
	field := fmt.Sprintf("events[%d].generated_time", i)
	if ts == nil || ts.CheckValid() != nil || ts.AsTime().IsZero() {
		return time.Time{}, false, &Error{Field: field, Reason: ReasonInvalidValue, Detail: "is missing or not a valid time"}
	}
	at = ts.AsTime().UTC()
	if at.Before(now.Add(-MaxAge)) {
		return time.Time{}, false, &Error{Field: field, Reason: ReasonInvalidValue,
			Detail: fmt.Sprintf("is %s, more than %s before the door's clock (%s): refused, check the checker's clock", at.Format(time.RFC3339), MaxAge, now.UTC().Format(time.RFC3339))}
	}
	if at.After(now) {
		return now.UTC(), true, nil
	}
	return at, false, nil
}

// DeviceID checks the device id of event i ("" passes as ""): any form
// uuid.Parse reads (as FleetService's GetDevice takes it: upper case, no
// hyphens, braces, urn:uuid:), returned canonical (lower case, hyphenated);
// anything else is an *Error naming events[i].device_id.
func DeviceID(i int, id string) (string, error) {
	if id == "" {
		return "", nil
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return "", &Error{Field: fmt.Sprintf("events[%d].device_id", i), Reason: ReasonInvalidValue, Detail: "is not a UUID " + textcheck.Quote(id)}
	}
	return u.String(), nil
}

// fromText turns textcheck's refusal into an *Error (nil stays nil).
func fromText(err error) error {
	if err == nil {
		return nil
	}
	te := err.(*textcheck.Error)
	return &Error{Field: te.Field, Reason: te.Reason, Detail: te.Detail}
}

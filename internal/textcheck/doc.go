// Package textcheck is the one check that text from outside (operator
// requests, link messages) passes before the hub stores or logs it, and the
// one way the hub echoes such text back (Prefix). Both hub/fleet and
// hub/link use it; it imports nothing of the hub or the satellite.
//
// What is refused (in this order; the first problem is reported):
//
//   - longer than the field's limit, in bytes (ReasonTooLong);
//   - not valid UTF-8 (ReasonInvalidUTF8): PostgreSQL text and proto3
//     strings must be UTF-8;
//   - a control character (ReasonControlChar): U+0000 (NUL, which
//     PostgreSQL cannot store in text at all), the other C0 controls
//     U+0001-U+001F, DEL U+007F and the C1 controls U+0080-U+009F. Tab is
//     accepted everywhere; newline (U+000A) only in free text (Text), such
//     as a quarantine reason or a condition message, never in a one-line
//     value (Line) such as an id, a name or a version. Carriage return is
//     refused everywhere: it rewrites terminal lines and log views, and no
//     value the hub stores needs it.
//
// Other characters, including Unicode format characters (bidirectional
// marks, zero-width joiners), are accepted: they are valid text, and the
// hub's logs quote or escape them.
//
// The refusal is an *Error naming the field by its proto path (for example
// "reason" or "batch.devices[3].device_id") with a stable Reason that
// hub/grpcerr turns into a google.rpc.BadRequest field violation and an
// ErrorInfo reason. Its message never contains the whole value.
package textcheck

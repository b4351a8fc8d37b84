package feed

import (
	"strconv"

	"github.com/jackc/pgx/v5"
)

// Feed source 7: validation runs' starts, check results and verdicts
// (validation_events, migrations/00037).

// EventValidation: a validation run started, recorded a check's result,
// passed or failed.
const EventValidation Kind = "VALIDATION"

// ValidationEvent is one row of validation_events.
type ValidationEvent struct {
	RunID, DeviceID, DeviceName, Site string
	// Event is STARTED, RESULT, PASSED, FAILED or REMEDIATION (a
	// validation rule of the policy quarantined the device for its ladder).
	Event string
	// Check and Result (PASS or FAIL) for RESULT; Detail the check's
	// output excerpt (RESULT) or the run's message (PASSED, FAILED).
	Check, Result, Detail string
}

func init() {
	feedSources = append(feedSources, feedSource{no: 7, kind: EventValidation, query: `
		SELECT e.xid::text, e.id, e.recorded_at, e.run_id::text, e.device_id::text, d.name, e.site, e.event,
			e.check_name, e.result, e.detail
		FROM validation_events e
		JOIN devices d ON d.id = e.device_id
` + page("e.", "e.site", anyStatus), scan: scanFeedValidation})
}

func scanFeedValidation(r pgx.CollectableRow) (Event, error) {
	var ev Event
	var x string
	var e ValidationEvent
	err := r.Scan(&x, &ev.Cursor.ID, &ev.At, &e.RunID, &e.DeviceID, &e.DeviceName, &e.Site, &e.Event, &e.Check, &e.Result, &e.Detail)
	ev.Kind, ev.Validation = EventValidation, &e
	ev.Cursor.XID, _ = strconv.ParseUint(x, 10, 64)
	return ev, err
}

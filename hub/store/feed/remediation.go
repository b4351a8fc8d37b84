package feed

import (
	"strconv"

	"github.com/jackc/pgx/v5"
)

// Feed source 6: the remediation ladders' steps and outcomes
// (remediation_events, migrations/00030).

// EventRemediation: a remediation ladder's step or outcome.
const EventRemediation Kind = "REMEDIATION"

// RemediationEvent is one row of remediation_events.
type RemediationEvent struct {
	DeviceID, DeviceName, Site, Rule string
	// Event is LADDER_STARTED, STEP_STARTED, ..., HANDOFF_CLOSED.
	Event string
	// Step is 1-based (0: not about a step); Kind and OperationID its
	// operation's.
	Step                int
	Kind, OperationID   string
	LadderID, HandoffID int64
	Detail              string
}

func init() {
	feedSources = append(feedSources, feedSource{no: 6, kind: EventRemediation, query: `
		SELECT e.xid::text, e.id, e.recorded_at, e.device_id::text, d.name, e.site, e.rule, e.event, e.step, e.kind,
			COALESCE(e.operation_id::text, ''), COALESCE(e.ladder_id, 0), COALESCE(e.handoff_id, 0), e.detail
		FROM remediation_events e
		JOIN devices d ON d.id = e.device_id
` + page("e.", "e.site", anyStatus), scan: scanFeedRemediation})
}

func scanFeedRemediation(r pgx.CollectableRow) (Event, error) {
	var ev Event
	var x string
	var e RemediationEvent
	err := r.Scan(&x, &ev.Cursor.ID, &ev.At, &e.DeviceID, &e.DeviceName, &e.Site, &e.Rule, &e.Event, &e.Step, &e.Kind,
		&e.OperationID, &e.LadderID, &e.HandoffID, &e.Detail)
	ev.Kind, ev.Remediation = EventRemediation, &e
	ev.Cursor.XID, _ = strconv.ParseUint(x, 10, 64)
	return ev, err
}

package web

import (
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
)

// Conditions are coloured by what their value means, not by True/False:
// a fault is red, a warning amber, healthy green, and the state flags
// (allocated, in the validation pool, offered) neutral whichever their
// value, so an idle node's InstanceAllocated=False is not an alarm.

// stateFlags are the conditions that say where a device is, not whether
// it is well: False is as normal as True.
var stateFlags = map[string]bool{
	string(condition.InValidationPool):  true,
	string(condition.InstanceAllocated): true,
	string(condition.CustomerAllocated): true,
	string(condition.CustomerReady):     true,
}

// warnings are the conditions whose False is a planned or passing state
// (maintenance, enrolment), not a fault.
var warnings = map[string]bool{
	string(condition.MaintenanceClear): true,
	string(condition.Enrolled):         true,
}

// condClass is the CSS class of a condition of type typ with status st
// (True, False, Unknown): cond-ok, cond-fault, cond-warn, cond-flag-on,
// cond-flag-off or cond-unknown.
func condClass(typ, st string) string {
	switch {
	case st != "True" && st != "False":
		return "cond cond-unknown"
	case stateFlags[typ] && st == "True":
		return "cond cond-flag-on"
	case stateFlags[typ]:
		return "cond cond-flag-off"
	case st == "True":
		return "cond cond-ok"
	case warnings[typ]:
		return "cond cond-warn"
	}
	return "cond cond-fault"
}

// lanePrefix is the timeline lane's class prefix for a condition type:
// flag- (neutral), warn- (amber when False) or cond- (red when False).
func lanePrefix(typ string) string {
	switch {
	case stateFlags[typ]:
		return "flag-"
	case warnings[typ]:
		return "warn-"
	}
	return "cond-"
}

// clipBytes is how long a text may be before the page shows only its
// start, with a <details> to expand it.
const clipBytes = 160

// clipHead is the first clipBytes of s, cut at a rune boundary.
func clipHead(s string) string {
	if len(s) <= clipBytes {
		return s
	}
	n := clipBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.TrimSpace(s[:n])
}

// dur is the time from a to b ("" when a is unset; until now when b is
// unset): "850ms", "42s", "3m 5s", "2h 4m".
func dur(a, b *timestamppb.Timestamp) string {
	if a == nil {
		return ""
	}
	end := time.Now()
	if b != nil {
		end = b.AsTime()
	}
	d := end.Sub(a.AsTime())
	switch {
	case d < 0:
		d = 0
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Second).String()
	}
	return humanAge(end, a.AsTime())
}

// outcomeWords say what a release does to a device (ReleaseOutcome).
var outcomeWords = map[ironlinkv1.ReleaseOutcome]string{
	ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_RESTORED_OFFERED:     "released, offered to customers again (as before the quarantine)",
	ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_RESTORED_NOT_OFFERED: "released, not offered (it was not before the quarantine)",
	ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_STILL_HELD:           "stays quarantined: another hold remains",
	ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_HELD_BY_OTHERS:       "nothing released: only other sources hold it",
	ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_NOT_QUARANTINED:      "nothing to release: not quarantined",
}

package ctl

import (
	"fmt"
	"io"
	"strings"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// printExplanation prints GetDevice's explanation under the Reason line of
// describe device: the rule of the status order that matched, the short
// form, the conditions behind it with their reasons, ages and messages,
// the quarantine in force (who, why, from where, how far applied) and, for
// UNREACHABLE, the site's silence. Nothing when the hub sent none (an
// older hub).
func (a *app) printExplanation(w io.Writer, e *ironlinkv1.StatusExplanation) {
	if e == nil {
		return
	}
	field(w, "Why", e.GetRuleDescription())
	if e.GetMessage() != "" {
		field(w, "  Message", e.GetMessage())
	}
	for _, c := range e.GetConditions() {
		line := fmt.Sprintf("%s=%s: %s, for %s", c.GetType(), conditionStatusName(c.GetStatus()), c.GetReason(), a.age(c.GetLastTransitionTime()))
		if m := c.GetMessage(); m != "" && m != e.GetMessage() && !strings.Contains(e.GetMessage(), m) {
			line += ": " + truncate(m, 100)
		}
		field(w, "  Because", line)
	}
	if s := e.GetSiteSilence(); s != nil {
		seen := "never heard from"
		if s.GetLastSeenTime() != nil {
			seen = "last heard " + a.age(s.GetLastSeenTime()) + " ago"
		}
		field(w, "  Site", fmt.Sprintf("%s %s; last known status %s", s.GetSite(), seen, statusName(e.GetLastKnownStatus())))
	}
	if q := e.GetQuarantine(); q != nil {
		applied := "not applied yet"
		if q.GetApplied() {
			applied = "applied by the site"
		}
		line := fmt.Sprintf("by %s from %s %s ago: %q (generation %d, command %s %s, %s)", q.GetActor(), q.GetSource(),
			a.age(q.GetChangeTime()), q.GetReason(), q.GetGeneration(), shortID(q.GetCommandId()), commandStateName(q.GetCommandState()), applied)
		if q.GetLastError() != "" {
			line += "; last error: " + truncate(q.GetLastError(), 100)
		}
		field(w, "  Quarantined", line)
	}
}

package policy

import (
	"fmt"
	"time"
)

// ReasonAwaitingFreshEvidence is the reason of a PENDING decision (and of
// its pending action) whose trigger waits for fresh evidence from its site
// (Evidence.Check): the policy decides it again, by itself, once a fresh
// poll confirms it, and the action expires once the cause is cleared.
const ReasonAwaitingFreshEvidence = "AwaitingFreshEvidence"

// SiteMark is one site condition the satellite reports about its polls
// (InventoryPolled, ListingConsistent), as the hub stored it.
type SiteMark struct {
	// Status is "True", "False" or "Unknown"; Reason and Message as sent.
	Status, Reason, Message string
	// At is the condition's observed time (the satellite's clock);
	// Received when the hub received that observation (the hub's clock,
	// zero when unknown).
	At, Received time.Time
}

// Evidence is what the hub knows about how fresh its view of a site is
// (docs/reference/policy.md "Fresh evidence").
type Evidence struct {
	// Reachable is false while the site is UNREACHABLE (stale).
	Reachable bool
	// LinkUp is true while a link of the site is open on some replica;
	// LinkSince is when the current (or last) link came up (the hub's clock).
	LinkUp    bool
	LinkSince time.Time
	// SnapshotDue is true while the link's satellite is a new process
	// (another boot than the one whose batches the hub holds) whose
	// snapshot the hub has not applied yet: the devices' conditions it
	// holds are from before that process.
	SnapshotDue bool
	// LastSeen is when the site was last heard from.
	LastSeen time.Time
	// Polled is the site's InventoryPolled condition (nil: never reported);
	// Listing its ListingConsistent condition (nil: never reported).
	Polled, Listing *SiteMark
	// FreshFor is the freshness bound: the last poll may be at most this
	// old (the hub's --stale-after).
	FreshFor time.Duration
}

// Check returns "" when the site's evidence is fresh at now, else why not:
// the site is unreachable, its link ended, a restarted satellite's
// snapshot is not applied yet, the satellite reported no poll,
// its last poll failed, no poll was reported over the current link (the
// mark was received before the link came up), the last
// poll is older than FreshFor, or the last listing had hazards.
func (e Evidence) Check(now time.Time) string {
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	switch {
	case !e.Reachable:
		return fmt.Sprintf("the site is unreachable (last heard %s): not acting on what it last reported", at(e.LastSeen))
	case !e.LinkUp:
		return fmt.Sprintf("the site's link ended (last heard %s): not acting on what it last reported", at(e.LastSeen))
	case e.SnapshotDue:
		return "the satellite restarted and the hub has not applied its snapshot yet: not acting on the conditions from before"
	case e.Polled == nil:
		return "the satellite has reported no InventoryPolled mark yet: waiting for a poll"
	case e.Polled.Status != "True":
		return fmt.Sprintf("the satellite's last poll failed (InventoryPolled=%s/%s: %s)", e.Polled.Status, e.Polled.Reason, e.Polled.Message)
	case e.Polled.Received.Before(e.LinkSince):
		return fmt.Sprintf("no poll reported since the link came up at %s (last poll %s)", at(e.LinkSince), at(e.Polled.At))
	case e.FreshFor > 0 && now.Sub(e.Polled.At) > e.FreshFor:
		return fmt.Sprintf("the last poll (%s) is %s old, older than the freshness bound %s", at(e.Polled.At),
			now.Sub(e.Polled.At).Truncate(time.Second), e.FreshFor)
	case e.Listing != nil && e.Listing.Status == "False":
		return fmt.Sprintf("the last listing had hazards (ListingConsistent=False/%s: %s)", e.Listing.Reason, e.Listing.Message)
	}
	return ""
}

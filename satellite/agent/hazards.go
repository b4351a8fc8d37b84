package agent

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/textcheck"
	"github.com/ironlink/ironlink/satellite/ironic"
)

// Listing hazard kinds, the kind label of
// ironlink_satellite_listing_hazards_total (docs/reference/metrics.md).
const (
	// HazardUnsentField: a node's answer lacked a field that was asked for
	// (one count per node and field).
	HazardUnsentField = "unsent_field"
	// HazardDuplicateNode: a node was listed on more than one page (one
	// count per node).
	HazardDuplicateNode = "duplicate_node"
)

// HazardKinds lists the hazard kinds, in the order the site condition
// names them.
var HazardKinds = []string{HazardUnsentField, HazardDuplicateNode}

// listingHazards counts the hazards of one complete listing: kind → count,
// and for unsent fields field → nodes lacking it.
func listingHazards(nodes []ironic.Node) (kinds map[string]int, unsent map[string]int) {
	kinds, unsent = map[string]int{}, map[string]int{}
	for _, n := range nodes {
		for f := range n.Unsent {
			unsent[f]++
			kinds[HazardUnsentField]++
		}
		if n.ListedTwice {
			kinds[HazardDuplicateNode]++
		}
	}
	return kinds, unsent
}

// reportPoll reports a completed listing: its hazards counted per kind on
// the Observer, ListingConsistent (False, reason naming the first hazard
// kind, when there were any: the poll is degraded) and the poll-success
// mark InventoryPolled=True observed at at. Called after the poll's deltas
// were pushed, so the link sends the mark after them.
func (a *Agent) reportPoll(nodes []ironic.Node, at time.Time) {
	kinds, unsent := listingHazards(nodes)
	if a.cfg.Observer != nil {
		for _, k := range HazardKinds {
			if kinds[k] > 0 {
				a.cfg.Observer.ListingHazards(k, kinds[k])
			}
		}
	}
	if a.site == nil {
		return
	}
	lc := condition.Condition{Type: condition.ListingConsistent, Status: condition.True, Reason: condition.ReasonNoHazards,
		Message: "the last listing had none of Ironic's listing hazards", ObservedTime: at}
	switch {
	case kinds[HazardUnsentField] > 0:
		lc.Status, lc.Reason = condition.False, condition.ReasonFieldsUnsent
		lc.Message = "Ironic's listing lacked fields that were asked for (nodes lacking each: " + summary(unsent) + ")"
	case kinds[HazardDuplicateNode] > 0:
		lc.Status, lc.Reason = condition.False, condition.ReasonDuplicateNodes
		lc.Message = fmt.Sprintf("Ironic's listing returned %d nodes on more than one page", kinds[HazardDuplicateNode])
	}
	a.site.Mark(lc)
	a.site.Mark(condition.Condition{Type: condition.InventoryPolled, Status: condition.True, Reason: condition.ReasonPollSucceeded,
		Message: fmt.Sprintf("listed %d nodes", len(nodes)), ObservedTime: at})
}

// reportPollFailed sets InventoryPolled=False/PollFailed with err.
func (a *Agent) reportPollFailed(err error) {
	if a.site == nil {
		return
	}
	a.site.Mark(condition.Condition{Type: condition.InventoryPolled, Status: condition.False, Reason: condition.ReasonPollFailed,
		Message: textcheck.SanitizeText(err.Error(), condition.MaxMessageBytes)})
}

// summary renders field → count as "fault=17,lessee=17" (sorted).
func summary(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Itoa(m[k])
	}
	return strings.Join(parts, ",")
}

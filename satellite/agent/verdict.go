package agent

import (
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// verdict is what orphanVerdict decides for one judged sweep.
type verdict struct {
	// suspects are the candidates to remember for the next sweep, with
	// the time each was first seen.
	suspects map[mismatchKey]time.Time
	// reported are the mismatches to report, by node (at most
	// maxMismatchesPerDevice each).
	reported map[string][]*ironlinkv1.InstanceMismatch
	// newlyReported counts the reported mismatches that this sweep's
	// candidates confirmed (the others are kept from earlier sweeps for
	// undecided nodes).
	newlyReported int
}

// orphanVerdict is the sweep's two-sweep rule (docs/design/openstack.md §4: "require
// the mismatch on two consecutive sweeps"), a pure function of the last
// sweep's memory and this sweep's findings:
//
//   - a candidate found now that was a suspect of the last sweep is
//     reported, with the first time it was seen; one found for the first
//     time becomes a suspect only;
//   - a suspect or report not found again is dropped (the mismatch is
//     gone) — unless its node is undecided (a read this sweep failed): no
//     verdict for a node is not a verdict, so its suspects and reports,
//     first-seen times included, are kept as they were.
//
// prevSuspects and prevReported are the last sweep's output (not changed);
// found are this sweep's candidates (their messages are copied, not
// changed); now is the first-seen time of new suspects.
func orphanVerdict(prevSuspects map[mismatchKey]time.Time, prevReported map[string][]*ironlinkv1.InstanceMismatch,
	found []candidate, undecided map[string]bool, now time.Time) verdict {
	v := verdict{suspects: make(map[mismatchKey]time.Time, len(found)), reported: map[string][]*ironlinkv1.InstanceMismatch{}}
	for _, c := range found {
		k := mismatchKey{node: c.node, kind: c.m.GetKind(), server: c.m.GetNovaServerId()}
		first, seenBefore := prevSuspects[k]
		if !seenBefore {
			first = now
		}
		v.suspects[k] = first
		if seenBefore && len(v.reported[c.node]) < maxMismatchesPerDevice {
			m := proto.Clone(c.m).(*ironlinkv1.InstanceMismatch)
			m.FirstSeenTime = timestamppb.New(first)
			v.reported[c.node] = append(v.reported[c.node], m)
			v.newlyReported++
		}
	}
	for k, first := range prevSuspects {
		if _, ok := v.suspects[k]; !ok && undecided[k.node] {
			v.suspects[k] = first
		}
	}
	for id := range undecided {
		if ms, ok := prevReported[id]; ok {
			v.reported[id] = ms
		}
	}
	return v
}

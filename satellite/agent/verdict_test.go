package agent

import (
	"maps"
	"slices"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

func TestOrphanVerdict(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	now := t0.Add(5 * time.Minute)
	const (
		novaUnknown = ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NOVA_UNKNOWN
		nodeUnaware = ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NODE_UNAWARE
	)
	cand := func(node string, kind ironlinkv1.InstanceMismatchKind, server string) candidate {
		return candidate{node, &ironlinkv1.InstanceMismatch{Kind: kind, NovaServerId: server, IronicInstanceUuid: server}}
	}
	key := func(node string, kind ironlinkv1.InstanceMismatchKind, server string) mismatchKey {
		return mismatchKey{node: node, kind: kind, server: server}
	}
	rep := func(kind ironlinkv1.InstanceMismatchKind, server string) *ironlinkv1.InstanceMismatch {
		return &ironlinkv1.InstanceMismatch{Kind: kind, NovaServerId: server, IronicInstanceUuid: server}
	}
	many := make([]candidate, 0, maxMismatchesPerDevice+2)
	manyPrev := map[mismatchKey]time.Time{}
	for i := range maxMismatchesPerDevice + 2 {
		s := string(rune('a' + i))
		many = append(many, cand("n1", nodeUnaware, s))
		manyPrev[key("n1", nodeUnaware, s)] = t0
	}
	for _, tc := range []struct {
		name         string
		prev         map[mismatchKey]time.Time
		prevReported map[string][]*ironlinkv1.InstanceMismatch
		found        []candidate
		undecided    map[string]bool
		// want: suspect keys with first-seen time; reported node → servers
		wantSuspects map[mismatchKey]time.Time
		wantReported map[string][]string
		wantNew      int
	}{
		{name: "nothing found, nothing known"},
		{name: "first sighting is a suspect, not a report",
			found:        []candidate{cand("n1", novaUnknown, "s1")},
			wantSuspects: map[mismatchKey]time.Time{key("n1", novaUnknown, "s1"): now}},
		{name: "second consecutive sighting is reported with the first time",
			prev:         map[mismatchKey]time.Time{key("n1", novaUnknown, "s1"): t0},
			found:        []candidate{cand("n1", novaUnknown, "s1")},
			wantSuspects: map[mismatchKey]time.Time{key("n1", novaUnknown, "s1"): t0},
			wantReported: map[string][]string{"n1": {"s1"}}, wantNew: 1},
		{name: "a suspect not seen again is dropped",
			prev: map[mismatchKey]time.Time{key("n1", novaUnknown, "s1"): t0}},
		{name: "a report not seen again is dropped",
			prev:         map[mismatchKey]time.Time{key("n1", novaUnknown, "s1"): t0},
			prevReported: map[string][]*ironlinkv1.InstanceMismatch{"n1": {rep(novaUnknown, "s1")}}},
		{name: "another kind or server on the same node starts over",
			prev:         map[mismatchKey]time.Time{key("n1", novaUnknown, "s1"): t0},
			found:        []candidate{cand("n1", nodeUnaware, "s1"), cand("n1", novaUnknown, "s2")},
			wantSuspects: map[mismatchKey]time.Time{key("n1", nodeUnaware, "s1"): now, key("n1", novaUnknown, "s2"): now}},
		{name: "an undecided node keeps its suspects and reports",
			prev:         map[mismatchKey]time.Time{key("n1", novaUnknown, "s1"): t0, key("n2", nodeUnaware, "s2"): t0},
			prevReported: map[string][]*ironlinkv1.InstanceMismatch{"n1": {rep(novaUnknown, "s1")}},
			undecided:    map[string]bool{"n1": true, "n2": true},
			wantSuspects: map[mismatchKey]time.Time{key("n1", novaUnknown, "s1"): t0, key("n2", nodeUnaware, "s2"): t0},
			wantReported: map[string][]string{"n1": {"s1"}}},
		{name: "only undecided nodes keep what was known",
			prev:         map[mismatchKey]time.Time{key("n1", novaUnknown, "s1"): t0, key("n2", novaUnknown, "s2"): t0},
			prevReported: map[string][]*ironlinkv1.InstanceMismatch{"n1": {rep(novaUnknown, "s1")}, "n2": {rep(novaUnknown, "s2")}},
			undecided:    map[string]bool{"n2": true},
			wantSuspects: map[mismatchKey]time.Time{key("n2", novaUnknown, "s2"): t0},
			wantReported: map[string][]string{"n2": {"s2"}}},
		{name: "reports per node are capped",
			prev: manyPrev, found: many, wantSuspects: manyPrev,
			wantReported: map[string][]string{"n1": func() []string {
				var s []string
				for i := range maxMismatchesPerDevice {
					s = append(s, string(rune('a'+i)))
				}
				return s
			}()}, wantNew: maxMismatchesPerDevice},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prevCopy := maps.Clone(tc.prev)
			v := orphanVerdict(tc.prev, tc.prevReported, tc.found, tc.undecided, now)
			if !maps.Equal(v.suspects, tc.wantSuspects) {
				t.Errorf("suspects %v, want %v", v.suspects, tc.wantSuspects)
			}
			got := map[string][]string{}
			for node, ms := range v.reported {
				for _, m := range ms {
					got[node] = append(got[node], m.GetNovaServerId())
					first, ok := tc.prev[key(node, m.GetKind(), m.GetNovaServerId())]
					if ok && m.GetFirstSeenTime() != nil && !m.GetFirstSeenTime().AsTime().Equal(first) {
						t.Errorf("%s/%s first seen %s, want %s", node, m.GetNovaServerId(), m.GetFirstSeenTime().AsTime(), first)
					}
				}
			}
			if len(got) != len(tc.wantReported) {
				t.Errorf("reported %v, want %v", got, tc.wantReported)
			}
			for node, want := range tc.wantReported {
				if !slices.Equal(got[node], want) {
					t.Errorf("reported for %s: %v, want %v", node, got[node], want)
				}
			}
			if v.newlyReported != tc.wantNew {
				t.Errorf("newly reported %d, want %d", v.newlyReported, tc.wantNew)
			}
			if !maps.Equal(tc.prev, prevCopy) {
				t.Error("the previous suspects were changed")
			}
			for _, c := range tc.found {
				if c.m.GetFirstSeenTime() != nil {
					t.Error("a candidate's message was changed")
				}
			}
		})
	}
}

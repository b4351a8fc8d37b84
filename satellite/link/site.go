package link

import (
	"slices"
	"sync"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/wire"
)

// SiteState holds the site-level conditions (condition.SiteTypes) the link
// reports to the hub in SiteConditions messages: after every Welcome and
// whenever one changes. Safe for concurrent use.
type SiteState struct {
	mu      sync.Mutex
	conds   map[condition.Type]condition.Condition
	changed chan struct{}
	onSet   func(condition.Condition)
}

// NewSiteState returns an empty state. onSet, when not nil, is called
// (without locks) with every condition that changed, e.g. to export it as
// a metric.
func NewSiteState(onSet func(condition.Condition)) *SiteState {
	return &SiteState{conds: map[condition.Type]condition.Condition{}, changed: make(chan struct{}, 1), onSet: onSet}
}

// Set records c (its ObservedTime defaults to now; LastTransitionTime is
// kept while the status stays the same) and reports whether status, reason
// or message changed, in which case the link sends the new set.
func (s *SiteState) Set(c condition.Condition) bool {
	now := time.Now().UTC()
	if c.ObservedTime.IsZero() {
		c.ObservedTime = now
	}
	c.Message = condition.Truncate(c.Message)
	s.mu.Lock()
	old, had := s.conds[c.Type]
	switch {
	case had && old.Status == c.Status:
		c.LastTransitionTime = old.LastTransitionTime
	case c.LastTransitionTime.IsZero():
		c.LastTransitionTime = c.ObservedTime
	}
	changed := !had || !old.SameObservation(c)
	if changed {
		s.conds[c.Type] = c
	}
	s.mu.Unlock()
	if changed {
		select {
		case s.changed <- struct{}{}:
		default:
		}
		if s.onSet != nil {
			s.onSet(c)
		}
	}
	return changed
}

// Mark records c as Set does and always has the link send the set, even
// when only its ObservedTime moved: a poll-success mark (InventoryPolled)
// that tells the hub the site was just observed. It returns whether
// status, reason or message changed.
func (s *SiteState) Mark(c condition.Condition) bool {
	changed := s.Set(c)
	if !changed {
		now := time.Now().UTC()
		if c.ObservedTime.IsZero() {
			c.ObservedTime = now
		}
		s.mu.Lock()
		if old, ok := s.conds[c.Type]; ok && old.SameObservation(condition.Condition{Type: c.Type, Status: c.Status,
			Reason: c.Reason, Message: condition.Truncate(c.Message), ObservedGeneration: c.ObservedGeneration}) {
			old.ObservedTime = c.ObservedTime
			s.conds[c.Type] = old
		}
		s.mu.Unlock()
		select {
		case s.changed <- struct{}{}:
		default:
		}
	}
	return changed
}

// Get returns the condition of type t and whether it is set.
func (s *SiteState) Get(t condition.Type) (condition.Condition, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.conds[t]
	return c, ok
}

// All returns every condition in condition.SiteTypes order.
func (s *SiteState) All() []condition.Condition {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]condition.Condition, 0, len(s.conds))
	for _, c := range s.conds {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b condition.Condition) int {
		return slices.Index(condition.SiteTypes, a.Type) - slices.Index(condition.SiteTypes, b.Type)
	})
	return out
}

// message returns the SiteConditions message, or nil when nothing is set.
func (s *SiteState) message() *ironlinkv1.ConnectRequest {
	all := s.All()
	if len(all) == 0 {
		return nil
	}
	m := &ironlinkv1.SiteConditions{}
	for _, c := range all {
		m.Conditions = append(m.Conditions, wire.ConditionToProto(c))
	}
	return &ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_SiteConditions{SiteConditions: m}}
}

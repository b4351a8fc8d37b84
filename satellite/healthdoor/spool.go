package healthdoor

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// DefaultSpoolEvents is the default bound of the spool, in events
// (--health-spool-events).
const DefaultSpoolEvents = 4096

// retryAfter is how long a report the hub could not commit (Unavailable
// and the like) waits before it is sent again.
const retryAfter = time.Second

// report is one door call's batch, waiting in the spool.
type report struct {
	id     uint64
	events []*ironlinkv1.HealthEvent
	// alone: the report goes in a HealthReport of its own (a combined one
	// it was part of was refused).
	alone bool
	// done receives the hub's answer (or a drop) once; buffered.
	done chan *ironlinkv1.HealthResult
}

// Spool holds the door's reports until the hub answered them: unsent ones
// in arrival order, and the ones sent on the current link awaiting their
// HealthResult. Take combines consecutive waiting reports into one
// HealthReport of at most MaxEvents events (one hub transaction for many
// door calls); when the hub refuses a combined report, its reports go
// again one by one, so one bad report never refuses another caller's. It
// is bounded in events: a report that does not fit drops the oldest
// reports (unsent first), whose callers get Unavailable: a newer report of
// a check supersedes an older one anyway. It implements satellite/link's
// HealthSpool.
type Spool struct {
	mu     sync.Mutex
	max    int
	events int
	nextID uint64
	unsent []*report
	// sent maps the id of each HealthReport sent on the current link to
	// the reports it combines.
	sent    map[uint64][]*report
	linkUp  bool
	wake    chan struct{}
	metrics *Metrics
}

// NewSpool returns an empty spool of at most max events (≤ 0:
// DefaultSpoolEvents), counting into m (nil: not counted).
func NewSpool(max int, m *Metrics) *Spool {
	if max <= 0 {
		max = DefaultSpoolEvents
	}
	return &Spool{max: max, sent: map[uint64][]*report{}, wake: make(chan struct{}, 1), metrics: m}
}

// put queues events and returns their report; reports dropped to make room
// are answered Unavailable. A batch larger than the whole spool is
// refused (nil).
func (s *Spool) put(events []*ironlinkv1.HealthEvent) *report {
	s.mu.Lock()
	if len(events) > s.max {
		s.mu.Unlock()
		return nil
	}
	for s.events+len(events) > s.max {
		s.dropOldest()
	}
	s.nextID++
	r := &report{id: s.nextID, events: events, done: make(chan *ironlinkv1.HealthResult, 1)}
	s.unsent = append(s.unsent, r)
	s.events += len(events)
	if !s.linkUp {
		s.metrics.add(OutcomeSpooled, len(events))
	}
	s.metrics.setDepth(s.events)
	s.mu.Unlock()
	s.signal()
	return r
}

// dropOldest drops the oldest unsent report, else the oldest HealthReport
// sent (its answer, should it come, is ignored). Called with mu held.
func (s *Spool) dropOldest() {
	var drop []*report
	if len(s.unsent) > 0 {
		drop, s.unsent = s.unsent[:1], s.unsent[1:]
	} else {
		oldest := uint64(0)
		for id := range s.sent {
			if oldest == 0 || id < oldest {
				oldest = id
			}
		}
		drop = s.sent[oldest]
		delete(s.sent, oldest)
	}
	for _, r := range drop {
		s.events -= len(r.events)
		s.metrics.add(OutcomeDropped, len(r.events))
		r.done <- &ironlinkv1.HealthResult{ReportId: r.id, Code: int32(codes.Unavailable),
			Message: "dropped from the satellite's full health spool (--health-spool-events) before the hub took it: send it again"}
	}
}

func (s *Spool) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Wake is signalled when reports wait to be sent.
func (s *Spool) Wake() <-chan struct{} { return s.wake }

// Take returns the unsent reports, oldest first, combined into
// HealthReports of at most MaxEvents events (a report marked alone in one
// of its own), and marks them sent on the current link.
func (s *Spool) Take() []*ironlinkv1.HealthReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.linkUp = true
	var out []*ironlinkv1.HealthReport
	var cur *ironlinkv1.HealthReport
	for _, r := range s.unsent {
		if cur == nil || r.alone || s.sent[cur.ReportId][0].alone || len(cur.Events)+len(r.events) > MaxEvents {
			s.nextID++
			cur = &ironlinkv1.HealthReport{ReportId: s.nextID}
			out = append(out, cur)
		}
		cur.Events = append(cur.Events, r.events...)
		s.sent[cur.ReportId] = append(s.sent[cur.ReportId], r)
	}
	s.unsent = nil
	return out
}

// Result takes the hub's answer to a HealthReport: a transient refusal
// (Unavailable, Aborted, DeadlineExceeded, ResourceExhausted) puts its
// reports back to be sent again after a second; another refusal of a
// combined report puts them back to go one by one; any other answer ends
// its reports.
func (s *Spool) Result(res *ironlinkv1.HealthResult) {
	s.mu.Lock()
	rs, ok := s.sent[res.GetReportId()]
	if !ok {
		s.mu.Unlock()
		return // dropped meanwhile, or a stale answer
	}
	delete(s.sent, res.GetReportId())
	code := codes.Code(res.GetCode())
	switch {
	case code == codes.Unavailable || code == codes.Aborted || code == codes.DeadlineExceeded || code == codes.ResourceExhausted:
		s.unsent = append(slices.Clone(rs), s.unsent...)
		s.mu.Unlock()
		time.AfterFunc(retryAfter, s.signal)
		return
	case code != codes.OK && len(rs) > 1:
		for _, r := range rs {
			r.alone = true
		}
		s.unsent = append(slices.Clone(rs), s.unsent...)
		s.mu.Unlock()
		s.signal()
		return
	}
	n := 0
	for _, r := range rs {
		n += len(r.events)
	}
	s.events -= n
	s.metrics.setDepth(s.events)
	s.mu.Unlock()
	outcome := OutcomeCommitted
	if code != codes.OK {
		outcome = OutcomeRefused
	}
	s.metrics.add(outcome, n)
	for _, r := range rs {
		r.done <- res
	}
}

// LinkDown puts the reports sent on the link that ended back in front of
// the unsent ones, in their order, to go again on the next link (the hub
// recognises the events it already committed by their ids).
func (s *Spool) LinkDown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.linkUp = false
	var back []*report
	for _, rs := range s.sent {
		back = append(back, rs...)
	}
	slices.SortFunc(back, func(a, b *report) int { return cmp.Compare(a.id, b.id) })
	s.unsent = append(back, s.unsent...)
	s.sent = map[uint64][]*report{}
}

// Depth is the number of events in the spool.
func (s *Spool) Depth() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.events
}

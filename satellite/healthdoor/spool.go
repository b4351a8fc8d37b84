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
	// done receives the hub's answer (or a drop) once; buffered.
	done chan *ironlinkv1.HealthResult
}

// Spool holds the door's reports until the hub answered them: unsent ones
// in arrival order, and the ones sent on the current link awaiting their
// HealthResult. It is bounded in events: a report that does not fit drops
// the oldest reports (unsent first), whose callers get Unavailable: a
// newer report of a check supersedes an older one anyway. It implements
// satellite/link's HealthSpool.
type Spool struct {
	mu      sync.Mutex
	max     int
	events  int
	nextID  uint64
	unsent  []*report
	sent    map[uint64]*report
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
	return &Spool{max: max, sent: map[uint64]*report{}, wake: make(chan struct{}, 1), metrics: m}
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

// dropOldest drops the oldest unsent report, else the oldest sent one
// (its answer, should it come, is ignored). Called with mu held.
func (s *Spool) dropOldest() {
	var r *report
	if len(s.unsent) > 0 {
		r, s.unsent = s.unsent[0], s.unsent[1:]
	} else {
		for _, x := range s.sent {
			if r == nil || x.id < r.id {
				r = x
			}
		}
		delete(s.sent, r.id)
	}
	s.events -= len(r.events)
	s.metrics.add(OutcomeDropped, len(r.events))
	r.done <- &ironlinkv1.HealthResult{ReportId: r.id, Code: int32(codes.Unavailable),
		Message: "dropped from the satellite's full health spool (--health-spool-events) before the hub took it: send it again"}
}

func (s *Spool) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Wake is signalled when reports wait to be sent.
func (s *Spool) Wake() <-chan struct{} { return s.wake }

// Take returns the unsent reports, oldest first, as HealthReports, and
// marks them sent on the current link.
func (s *Spool) Take() []*ironlinkv1.HealthReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.linkUp = true
	out := make([]*ironlinkv1.HealthReport, 0, len(s.unsent))
	for _, r := range s.unsent {
		s.sent[r.id] = r
		out = append(out, &ironlinkv1.HealthReport{ReportId: r.id, Events: r.events})
	}
	s.unsent = nil
	return out
}

// Result takes the hub's answer to a report: a transient refusal
// (Unavailable, Aborted, DeadlineExceeded, ResourceExhausted) puts the
// report back to be sent again after a second; any other answer ends it.
func (s *Spool) Result(res *ironlinkv1.HealthResult) {
	s.mu.Lock()
	r, ok := s.sent[res.GetReportId()]
	if !ok {
		s.mu.Unlock()
		return // dropped meanwhile, or a stale answer
	}
	delete(s.sent, r.id)
	switch codes.Code(res.GetCode()) {
	case codes.Unavailable, codes.Aborted, codes.DeadlineExceeded, codes.ResourceExhausted:
		s.unsent = append([]*report{r}, s.unsent...)
		s.mu.Unlock()
		time.AfterFunc(retryAfter, s.signal)
		return
	}
	s.events -= len(r.events)
	s.metrics.setDepth(s.events)
	s.mu.Unlock()
	if res.GetCode() == 0 {
		s.metrics.add(OutcomeCommitted, len(r.events))
	} else {
		s.metrics.add(OutcomeRefused, len(r.events))
	}
	r.done <- res
}

// LinkDown puts the reports sent on the link that ended back in front of
// the unsent ones, in their order, to go again on the next link (the hub
// recognises the ones it already committed by their event ids).
func (s *Spool) LinkDown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.linkUp = false
	back := make([]*report, 0, len(s.sent)+len(s.unsent))
	for _, r := range s.sent {
		back = append(back, r)
	}
	slices.SortFunc(back, func(a, b *report) int { return cmp.Compare(a.id, b.id) })
	s.unsent = append(back, s.unsent...)
	s.sent = map[uint64]*report{}
}

// Depth is the number of events in the spool.
func (s *Spool) Depth() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.events
}

package satsim

import "time"

// Commit latency bookkeeping: the time from a delta batch's first send to
// its ack (the hub acknowledges only after its commit), for tests that
// compare one site's latency with and without load from others.

// noteSentLocked records b's first send time (s.mu held).
func (s *Sat) noteSentLocked(seq uint64) {
	if s.sentAt == nil {
		s.sentAt = map[uint64]time.Time{}
	}
	if _, ok := s.sentAt[seq]; !ok {
		s.sentAt[seq] = time.Now()
	}
}

// noteAckedLocked records the latency of the batch seq acked now (s.mu
// held); nothing for a batch whose send was not recorded.
func (s *Sat) noteAckedLocked(seq uint64, now time.Time) {
	if at, ok := s.sentAt[seq]; ok {
		s.latencies = append(s.latencies, now.Sub(at))
		delete(s.sentAt, seq)
	}
}

// TakeAckLatencies returns the send-to-ack latency of every batch acked
// since the last call (first send to ack, in ack order) and forgets them.
func (s *Sat) TakeAckLatencies() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.latencies
	s.latencies = nil
	return l
}

package linktest

import (
	"fmt"
	"sync"

	"github.com/google/uuid"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// Checker checks what a hub sends on link streams. Each stream it wraps
// (Wrap, or every stream of a service it wraps with Service) is checked on
// its own, against these invariants:
//
//   - the first message is a Welcome, and it is the only one;
//   - every message carries exactly one kind;
//   - batch acks name sequences above 0 and strictly increase;
//   - a device's command generation never goes down: each Command's
//     generation, and each DesiredStates entry's, is at least the highest
//     this stream sent for the device before (equal is a redelivery);
//   - commands name UUIDs, a generation above 0 and a desired state;
//     desired-state entries likewise;
//   - heartbeats carry a valid sent_time;
//   - operations name a UUID, a kind, and an attempt above 0 that strictly
//     increases per operation on the stream (every delivery is a new
//     attempt);
//   - nothing is sent after a Send returned an error, nor after the
//     handler returned.
//
// A Checker is safe for concurrent use; its zero value is ready.
type Checker struct {
	mu         sync.Mutex
	violations []string
	wg         sync.WaitGroup
}

// Violations returns every violation seen so far, in order, each naming the
// stream (its number, from 1) and the message.
func (c *Checker) Violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.violations...)
}

// Wait waits until every Connect handler of a service wrapped by Service has
// returned.
func (c *Checker) Wait() { c.wg.Wait() }

var streamIDs struct {
	sync.Mutex
	n int
}

func (c *Checker) violate(stream int, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.violations = append(c.violations, fmt.Sprintf("link stream %d: ", stream)+fmt.Sprintf(format, args...))
}

// Wrap returns s with its Send checked. Call Returned when the handler has
// returned, so that a late Send counts as a violation.
func (c *Checker) Wrap(s ironlinkv1.LinkService_ConnectServer) *CheckedStream {
	streamIDs.Lock()
	streamIDs.n++
	n := streamIDs.n
	streamIDs.Unlock()
	return &CheckedStream{LinkService_ConnectServer: s, c: c, n: n, gens: map[string]int64{}}
}

// Service returns inner with every Connect stream checked (Wrap); Wait
// waits for those handlers.
func (c *Checker) Service(inner ironlinkv1.LinkServiceServer) ironlinkv1.LinkServiceServer {
	return &service{inner: inner, c: c}
}

type service struct {
	ironlinkv1.UnimplementedLinkServiceServer
	inner ironlinkv1.LinkServiceServer
	c     *Checker
}

func (s *service) Connect(stream ironlinkv1.LinkService_ConnectServer) error {
	s.c.wg.Add(1)
	defer s.c.wg.Done()
	cs := s.c.Wrap(stream)
	defer cs.Returned()
	return s.inner.Connect(cs)
}

// CheckedStream is a LinkService_ConnectServer whose Send checks the
// protocol (see Checker) before passing the message on.
type CheckedStream struct {
	ironlinkv1.LinkService_ConnectServer
	c *Checker
	n int

	mu       sync.Mutex
	sent     int
	lastAck  uint64
	gens     map[string]int64 // device → highest generation sent
	attempts map[string]int32 // operation → highest attempt sent
	failed   error            // first Send error
	returned bool
}

// Returned records that the handler returned: any later Send is a violation.
func (s *CheckedStream) Returned() {
	s.mu.Lock()
	s.returned = true
	s.mu.Unlock()
}

// Send checks m, then sends it on the wrapped stream.
func (s *CheckedStream) Send(m *ironlinkv1.ConnectResponse) error {
	s.mu.Lock()
	s.check(m)
	s.sent++
	s.mu.Unlock()
	err := s.LinkService_ConnectServer.Send(m)
	if err != nil {
		s.mu.Lock()
		if s.failed == nil {
			s.failed = err
		}
		s.mu.Unlock()
	}
	return err
}

// SendMsg is Send for callers that use the untyped stream API.
func (s *CheckedStream) SendMsg(m any) error {
	if r, ok := m.(*ironlinkv1.ConnectResponse); ok {
		return s.Send(r)
	}
	return s.LinkService_ConnectServer.SendMsg(m)
}

// check records every invariant m breaks. Callers hold s.mu.
func (s *CheckedStream) check(m *ironlinkv1.ConnectResponse) {
	bad := func(format string, args ...any) {
		s.c.violate(s.n, "message %d: "+format, append([]any{s.sent + 1}, args...)...)
	}
	switch {
	case s.returned:
		bad("sent after the handler returned: %v", m)
	case s.failed != nil:
		bad("sent after Send failed (%v): %v", s.failed, m)
	}
	if m.GetMsg() == nil {
		bad("no message kind set")
		return
	}
	if _, welcome := m.GetMsg().(*ironlinkv1.ConnectResponse_Welcome); welcome != (s.sent == 0) {
		if welcome {
			bad("a second Welcome")
		} else {
			bad("first message is %T, not a Welcome", m.GetMsg())
		}
	}
	switch msg := m.GetMsg().(type) {
	case *ironlinkv1.ConnectResponse_Ack:
		seq := msg.Ack.GetSequence()
		if seq == 0 {
			bad("ack of sequence 0")
		}
		if seq <= s.lastAck && s.lastAck > 0 {
			bad("ack %d after ack %d: acks must strictly increase", seq, s.lastAck)
		}
		s.lastAck = max(s.lastAck, seq)
	case *ironlinkv1.ConnectResponse_Command:
		cmd := msg.Command
		if _, err := uuid.Parse(cmd.GetCommandId()); err != nil {
			bad("command id %q is not a UUID", cmd.GetCommandId())
		}
		s.generation(bad, "command "+cmd.GetCommandId(), cmd.GetDeviceId(), cmd.GetGeneration(), cmd.GetDesired())
	case *ironlinkv1.ConnectResponse_DesiredStates:
		for _, d := range msg.DesiredStates.GetDevices() {
			s.generation(bad, "desired state", d.GetDeviceId(), d.GetGeneration(), d.GetDesired())
		}
	case *ironlinkv1.ConnectResponse_Heartbeat:
		if !msg.Heartbeat.GetSentTime().IsValid() {
			bad("heartbeat without a valid sent_time")
		}
	case *ironlinkv1.ConnectResponse_Operation:
		op := msg.Operation
		if _, err := uuid.Parse(op.GetOperationId()); err != nil {
			bad("operation id %q is not a UUID", op.GetOperationId())
		}
		if op.GetKind() == ironlinkv1.OperationKind_OPERATION_KIND_UNSPECIFIED {
			bad("operation %s without a kind", op.GetOperationId())
		}
		if s.attempts == nil {
			s.attempts = map[string]int32{}
		}
		if last := s.attempts[op.GetOperationId()]; op.GetAttempt() <= last {
			bad("operation %s attempt %d after attempt %d: attempts must strictly increase", op.GetOperationId(), op.GetAttempt(), last)
		}
		s.attempts[op.GetOperationId()] = max(s.attempts[op.GetOperationId()], op.GetAttempt())
	}
}

// generation checks one device's generation and desired state and records it.
func (s *CheckedStream) generation(bad func(string, ...any), what, device string, gen int64, desired ironlinkv1.ImpairmentState) {
	if _, err := uuid.Parse(device); err != nil {
		bad("%s: device id %q is not a UUID", what, device)
	}
	if gen <= 0 {
		bad("%s: device %s generation %d, want > 0", what, device, gen)
	}
	if desired == ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_UNSPECIFIED {
		bad("%s: device %s without a desired state", what, device)
	}
	if last, ok := s.gens[device]; ok && gen < last {
		bad("%s: device %s generation %d after %d: a device's generation must never go down", what, device, gen, last)
	}
	s.gens[device] = max(s.gens[device], gen)
}

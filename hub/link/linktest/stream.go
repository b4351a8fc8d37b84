package linktest

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// Stream is an in-memory LinkService_ConnectServer: the hub's handler
// (link.Server.Connect) Recvs what the test Pushes and Sends what the test
// reads with Next. Wrap it with a Checker to check what the hub sends.
// Methods are safe for concurrent use.
type Stream struct {
	ctx context.Context
	in  chan *ironlinkv1.ConnectRequest
	out chan *ironlinkv1.ConnectResponse

	mu        sync.Mutex
	closed    bool  // CloseSend called: Recv answers io.EOF once in is drained
	failAfter int   // Send fails after this many more messages; <0 never
	failErr   error // the error Send then returns
	done      chan struct{}
}

// NewStream returns a stream whose Context is ctx (carry the caller's
// identity with authn.NewContext). Sent messages are buffered (up to 4096)
// until read with Next.
func NewStream(ctx context.Context) *Stream {
	return &Stream{ctx: ctx, in: make(chan *ironlinkv1.ConnectRequest), out: make(chan *ironlinkv1.ConnectResponse, 4096),
		failAfter: -1, done: make(chan struct{})}
}

// Push hands m to the hub's next Recv; it blocks until the hub takes it and
// returns false when the stream's context ends first.
func (s *Stream) Push(m *ironlinkv1.ConnectRequest) bool {
	select {
	case s.in <- m:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// CloseSend makes the hub's next Recv return io.EOF (the satellite closed
// its side).
func (s *Stream) CloseSend() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
}

// FailSendsAfter makes Send fail with err after n more successful sends (a
// broken connection).
func (s *Stream) FailSendsAfter(n int, err error) {
	s.mu.Lock()
	s.failAfter, s.failErr = n, err
	s.mu.Unlock()
}

// Next returns the hub's next message, failing the test when none comes
// within timeout.
func (s *Stream) Next(t testing.TB, timeout time.Duration) *ironlinkv1.ConnectResponse {
	t.Helper()
	select {
	case m := <-s.out:
		return m
	case <-time.After(timeout):
		t.Fatalf("linktest: no message from the hub within %s", timeout)
		return nil
	}
}

// Sent returns the channel of the hub's messages, for tests that select on it.
func (s *Stream) Sent() <-chan *ironlinkv1.ConnectResponse { return s.out }

// Send implements the hub's side: it queues m for Next.
func (s *Stream) Send(m *ironlinkv1.ConnectResponse) error {
	s.mu.Lock()
	switch {
	case s.failAfter == 0:
		s.mu.Unlock()
		return s.failErr
	case s.failAfter > 0:
		s.failAfter--
	}
	s.mu.Unlock()
	select {
	case s.out <- m:
		return nil
	default:
		return errors.New("linktest: 4096 messages unread")
	}
}

// Recv implements the hub's side: the next pushed message, io.EOF after
// CloseSend, or the context's error.
func (s *Stream) Recv() (*ironlinkv1.ConnectRequest, error) {
	select {
	case m := <-s.in:
		return m, nil
	case <-s.done:
		return nil, io.EOF
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

// Context implements grpc.ServerStream.
func (s *Stream) Context() context.Context { return s.ctx }

// SetHeader implements grpc.ServerStream (headers are dropped).
func (s *Stream) SetHeader(metadata.MD) error { return nil }

// SendHeader implements grpc.ServerStream (headers are dropped).
func (s *Stream) SendHeader(metadata.MD) error { return nil }

// SetTrailer implements grpc.ServerStream (trailers are dropped).
func (s *Stream) SetTrailer(metadata.MD) {}

// SendMsg implements grpc.ServerStream for *ironlinkv1.ConnectResponse.
func (s *Stream) SendMsg(m any) error {
	r, ok := m.(*ironlinkv1.ConnectResponse)
	if !ok {
		return errors.New("linktest: SendMsg of a message that is not a ConnectResponse")
	}
	return s.Send(r)
}

// RecvMsg implements grpc.ServerStream for *ironlinkv1.ConnectRequest.
func (s *Stream) RecvMsg(m any) error {
	r, ok := m.(*ironlinkv1.ConnectRequest)
	if !ok {
		return errors.New("linktest: RecvMsg into a message that is not a ConnectRequest")
	}
	got, err := s.Recv()
	if err != nil {
		return err
	}
	proto.Reset(r)
	proto.Merge(r, got)
	return nil
}

var _ ironlinkv1.LinkService_ConnectServer = (*Stream)(nil)

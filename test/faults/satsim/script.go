package satsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// Script is a hand-driven link for hostile-satellite tests: it sends
// exactly the messages the test gives it, in order, and records what the
// hub answers. Unlike Sat it keeps no outbox and applies nothing.
type Script struct {
	stream ironlinkv1.LinkService_ConnectClient
	cancel context.CancelFunc
	recv   chan *ironlinkv1.ConnectResponse
	err    chan error // the stream's end (nil for a clean end)
}

// OpenScript opens a link on cc and sends first (normally a Hello; any
// message may be sent, to test what the hub does with it). It does not wait
// for the answer: read it with Next or Wait.
func OpenScript(ctx context.Context, cc grpc.ClientConnInterface, first *ironlinkv1.ConnectRequest) (*Script, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := ironlinkv1.NewLinkServiceClient(cc).Connect(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &Script{stream: stream, cancel: cancel, recv: make(chan *ironlinkv1.ConnectResponse, 1024), err: make(chan error, 1)}
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				s.err <- err
				close(s.recv)
				return
			}
			s.recv <- m
		}
	}()
	if err := stream.Send(first); err != nil && !errors.Is(err, io.EOF) {
		cancel()
		return nil, err
	}
	return s, nil
}

// HelloMsg wraps h as a ConnectRequest.
func HelloMsg(h *ironlinkv1.Hello) *ironlinkv1.ConnectRequest {
	return &ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Hello{Hello: h}}
}

// Send sends m. An error means the hub already ended the link (see Wait).
func (s *Script) Send(m *ironlinkv1.ConnectRequest) error { return s.stream.Send(m) }

// CloseSend closes the satellite's side, as a clean shutdown does.
func (s *Script) CloseSend() error { return s.stream.CloseSend() }

// Next returns the hub's next message, or an error when the link ended or
// none came within timeout.
func (s *Script) Next(timeout time.Duration) (*ironlinkv1.ConnectResponse, error) {
	select {
	case m, ok := <-s.recv:
		if !ok {
			return nil, errors.New("link ended")
		}
		return m, nil
	case <-time.After(timeout):
		return nil, fmt.Errorf("no message from the hub within %s", timeout)
	}
}

// Welcome reads the hub's Welcome and DesiredStates (what a good hello gets).
func (s *Script) Welcome(timeout time.Duration) (*ironlinkv1.Welcome, error) {
	m, err := s.Next(timeout)
	if err != nil {
		return nil, err
	}
	w := m.GetWelcome()
	if w == nil {
		return nil, fmt.Errorf("first answer %v, want a welcome", m)
	}
	if m, err := s.Next(timeout); err != nil || m.GetDesiredStates() == nil {
		return nil, fmt.Errorf("second answer %v (%v), want desired states", m, err)
	}
	return w, nil
}

// Wait reads until the hub ends the link (or timeout, which is an error)
// and returns the messages read and the status it ended with (OK for a
// clean end).
func (s *Script) Wait(timeout time.Duration) ([]*ironlinkv1.ConnectResponse, *status.Status, error) {
	defer s.cancel()
	var got []*ironlinkv1.ConnectResponse
	deadline := time.After(timeout)
	for {
		select {
		case m, ok := <-s.recv:
			if ok {
				got = append(got, m)
				continue
			}
			err := <-s.err
			if err == nil {
				return got, status.New(codes.OK, ""), nil
			}
			return got, status.Convert(err), nil
		case <-deadline:
			return got, nil, fmt.Errorf("the hub did not end the link within %s", timeout)
		}
	}
}

// Close ends the link from the satellite's side.
func (s *Script) Close() { s.cancel() }

package satsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/streamrecv"
)

// Run keeps a link open until ctx ends, reconnecting with full-jitter backoff.
func (s *Sat) Run(ctx context.Context) {
	opts := s.cfg.DialOptions
	if opts == nil {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	cc, err := grpc.NewClient(s.cfg.Addr, opts...)
	if err != nil {
		s.mu.Lock()
		s.violation("dial: %v", err)
		s.mu.Unlock()
		return
	}
	defer cc.Close()
	api := ironlinkv1.NewLinkServiceClient(cc)
	bo := 20 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := s.session(ctx, api)
		s.mu.Lock()
		s.connected = false
		if ctx.Err() == nil {
			s.linkErrs = append(s.linkErrs, fmt.Sprint(status.Code(err), ": ", err))
		}
		s.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > 5*time.Second {
			bo = 20 * time.Millisecond
		}
		d := time.Duration(mrand.Int64N(int64(bo)) + 1)
		s.logf("link down (%v); reconnecting in %s", err, d)
		bo = min(bo*2, s.cfg.MaxBackoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

// LinkErrors returns the errors that ended links so far.
func (s *Sat) LinkErrors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.linkErrs...)
}

// session runs one link: the handshake, then batches, heartbeats, acks,
// commands and results until the link ends.
func (s *Sat) session(ctx context.Context, api ironlinkv1.LinkServiceClient) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := api.Connect(ctx)
	if err != nil {
		return err
	}
	w, err := s.handshake(stream)
	if err != nil {
		return err
	}
	pending, last := s.acceptWelcome(w)
	s.logf("link up: replica %s epoch %d hub last %d", w.GetReplica(), w.GetEpoch(), last)
	msgs, recvErr := streamrecv.Start(ctx, stream.Recv)
	l := &link{s: s, stream: stream}
	if err := l.resend(pending); err != nil {
		return err
	}
	return l.serve(ctx, msgs, recvErr)
}

// handshake sends the Hello and waits for the hub's Welcome.
func (s *Sat) handshake(stream ironlinkv1.LinkService_ConnectClient) (*ironlinkv1.Welcome, error) {
	s.mu.Lock()
	hello := &ironlinkv1.Hello{Site: s.cfg.Site, BootId: s.bootID, Version: "satsim", LastSequenceSent: s.next - 1}
	s.mu.Unlock()
	if err := stream.Send(HelloMsg(hello)); err != nil {
		return nil, err
	}
	first, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	w := first.GetWelcome()
	if w == nil {
		return nil, errors.New("no welcome")
	}
	return w, nil
}

// acceptWelcome checks the hub's last committed sequence against what was
// sent and acked (a violation when it lost an acked batch or claims one
// never sent), drops the batches it committed and starts the link's
// window. It returns the results left over from the last link and the
// hub's last committed sequence.
func (s *Sat) acceptWelcome(w *ironlinkv1.Welcome) (pending []*ironlinkv1.CommandResult, last uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	last = w.GetLastCommittedSequence()
	s.links++
	s.replicas[w.GetReplica()]++
	switch {
	case last < s.lastAcked:
		s.violation("hub's last committed sequence %d is below the acked %d: an acknowledged batch was lost", last, s.lastAcked)
	case last > s.next-1:
		s.violation("hub's last committed sequence %d is above the last sent %d", last, s.next-1)
	}
	i := 0
	for i < len(s.unacked) && s.unacked[i].GetSequence() <= last {
		s.countAckedLocked(s.unacked[i], false)
		i++
	}
	s.unacked = s.unacked[i:]
	s.lastAcked = max(s.lastAcked, last)
	s.sentOnLink = 0
	s.connected = true
	pending = s.results
	s.results = nil
	return pending, last
}

// link is one open stream of a Sat.
type link struct {
	s      *Sat
	stream ironlinkv1.LinkService_ConnectClient
}

// sendResult sends a command result; one that cannot be sent is kept for
// the next link.
func (l *link) sendResult(r *ironlinkv1.CommandResult) error {
	if err := l.stream.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_CommandResult{CommandResult: r}}); err != nil {
		l.s.mu.Lock()
		l.s.results = append(l.s.results, r) // for the next link
		l.s.mu.Unlock()
		return err
	}
	return nil
}

// resend sends the results the last link could not, keeping the rest
// when one fails.
func (l *link) resend(pending []*ironlinkv1.CommandResult) error {
	for i, r := range pending {
		if err := l.sendResult(r); err != nil {
			l.s.mu.Lock()
			l.s.results = append(l.s.results, pending[i+1:]...)
			l.s.mu.Unlock()
			return err
		}
	}
	return nil
}

// fill sends batches until Window are in flight: unacked ones first, then
// new deltas while producing.
func (l *link) fill() error {
	s := l.s
	for {
		s.mu.Lock()
		inflight := s.sentOnLink
		var b *ironlinkv1.ConditionBatch
		if inflight < s.cfg.Window {
			if s.sentOnLink < len(s.unacked) {
				b = s.unacked[s.sentOnLink]
			} else if s.producing {
				b = s.newDeltaLocked()
			}
			if b != nil {
				s.sentOnLink++
				s.noteSentLocked(b.GetSequence())
			}
		}
		s.mu.Unlock()
		if b == nil {
			return nil
		}
		if err := l.stream.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Batch{Batch: b}}); err != nil {
			return err
		}
	}
}

// serve keeps the window full and answers the link's events until it
// ends: the hub's messages, wake-ups, heartbeat ticks and command results.
func (l *link) serve(ctx context.Context, msgs <-chan *ironlinkv1.ConnectResponse, recvErr <-chan error) error {
	s := l.s
	tick := time.NewTicker(s.cfg.HeartbeatInterval)
	defer tick.Stop()
	for {
		if err := l.fill(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			_ = l.stream.CloseSend()
			return ctx.Err()
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return errors.New("hub closed the link")
			}
			return err
		case <-s.wake:
		case <-tick.C:
			if err := l.stream.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Heartbeat{
				Heartbeat: &ironlinkv1.Heartbeat{SentTime: timestamppb.New(time.Now().Add(s.cfg.ClockOffset))}}}); err != nil {
				return err
			}
		case r := <-s.resultsCh:
			if err := l.sendResult(r); err != nil {
				return err
			}
		case m := <-msgs:
			s.handleMessage(m)
		}
	}
}

// handleMessage takes one message of the hub: an ack, a command (applied
// on its own goroutine), a heartbeat or desired states; anything else is a
// violation.
func (s *Sat) handleMessage(m *ironlinkv1.ConnectResponse) {
	switch msg := m.GetMsg().(type) {
	case *ironlinkv1.ConnectResponse_Ack:
		s.ack(msg.Ack)
	case *ironlinkv1.ConnectResponse_Command:
		s.receiveCommand(msg.Command)
	case *ironlinkv1.ConnectResponse_Heartbeat:
	case *ironlinkv1.ConnectResponse_DesiredStates:
		// Desired states for the resync: a scripted site has no
		// OpenStack to converge; commands carry what it applies.
	default:
		s.mu.Lock()
		s.violation("unexpected message %T", msg)
		s.mu.Unlock()
	}
}

// receiveCommand counts a command and applies it on its own goroutine
// (Config.OnCommand, else success at once); the result goes out on the
// link that is open when it is ready.
func (s *Sat) receiveCommand(cmd *ironlinkv1.Command) {
	s.mu.Lock()
	s.commands[cmd.GetCommandId()]++
	if _, ok := s.cmdFirst[cmd.GetCommandId()]; !ok {
		s.cmdFirst[cmd.GetCommandId()] = time.Now()
	}
	s.mu.Unlock()
	go func() {
		var r *ironlinkv1.CommandResult
		if s.cfg.OnCommand != nil {
			r = s.cfg.OnCommand(cmd)
		}
		if r == nil {
			r = &ironlinkv1.CommandResult{CommandId: cmd.GetCommandId(), DeviceId: cmd.GetDeviceId(),
				Generation: cmd.GetGeneration(), Success: true, Detail: "satsim: applied"}
		}
		s.resultsCh <- r
	}()
}

// countAckedLocked counts the condition changes of an acked delta batch
// (not duplicates, not snapshots).
func (s *Sat) countAckedLocked(b *ironlinkv1.ConditionBatch, dup bool) {
	if dup || b.GetSnapshot() != nil {
		return
	}
	for _, d := range b.GetDevices() {
		s.ackedDeltas += len(d.GetConditions())
	}
}

// ack takes the hub's ack of a batch: acks come in order for the batches
// this link sent.
func (s *Sat) ack(a *ironlinkv1.BatchAck) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq := a.GetSequence()
	if len(s.unacked) == 0 || s.unacked[0].GetSequence() != seq {
		// Acks come in order for the batches this link sent.
		if seq <= s.lastAcked {
			s.violation("ack %d at or below the acked %d", seq, s.lastAcked)
			return
		}
		s.violation("ack %d, expected %v", seq, firstSeq(s.unacked))
	}
	if a.GetDuplicate() {
		s.dupAcks++
	}
	i := 0
	now := time.Now()
	for i < len(s.unacked) && s.unacked[i].GetSequence() <= seq {
		s.countAckedLocked(s.unacked[i], a.GetDuplicate())
		s.noteAckedLocked(s.unacked[i].GetSequence(), now)
		i++
	}
	s.unacked = s.unacked[i:]
	s.sentOnLink = max(s.sentOnLink-i, 0)
	s.lastAcked = max(s.lastAcked, seq)
	s.signal()
}

// firstSeq is the first unacked sequence, for messages.
func firstSeq(b []*ironlinkv1.ConditionBatch) any {
	if len(b) == 0 {
		return "nothing"
	}
	return b[0].GetSequence()
}

// WaitDrained waits until every numbered batch is acked (after Produce(false)).
func (s *Sat) WaitDrained(ctx context.Context) error {
	for {
		s.mu.Lock()
		n, last, acked := len(s.unacked), s.next-1, s.lastAcked
		s.mu.Unlock()
		if n == 0 && acked == last {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("site %s: %d batches unacked (last sent %d, last acked %d): %w", s.cfg.Site, n, last, acked, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// IsRetryable reports whether a link error is one after which a satellite
// reconnects (all are, for this client); exported for tests that classify
// link endings.
func IsRetryable(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.PermissionDenied, codes.ResourceExhausted:
		return false
	}
	return true
}

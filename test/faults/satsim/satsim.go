// Package satsim is a scripted satellite for the fault-injection suite and
// the link benchmark: it speaks the link protocol (Hello → Welcome →
// numbered condition batches, acks, commands and results) with exact
// control and exact bookkeeping, so a test can tell whether every condition
// change reached the hub exactly once.
//
// A Sat owns a fixed set of devices. It starts with a full snapshot (every
// device, all seven conditions) and then, while producing, sends delta
// batches as fast as the hub acks them (at most Window unacked batches in
// flight). Every delta changes one condition of one device to a new,
// never-repeated message, so every change must appear as exactly one
// condition_history row at the hub. Unacked batches are kept and resent
// after a reconnect from the hub's last committed sequence, as the real
// satellite's outbox does.
package satsim

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
)

// Config configures a scripted satellite.
type Config struct {
	// Site is the site name.
	Site string
	// Addr is the hub (or load balancer) address.
	Addr string
	// Devices is the number of devices of the site (default 10).
	Devices int
	// DevicesPerBatch is the number of device updates per delta batch
	// (default 5, at most Devices).
	DevicesPerBatch int
	// Window bounds the unacked batches in flight (default 4).
	Window int
	// OnCommand answers a command; nil answers success at once. It runs on
	// its own goroutine.
	OnCommand func(*ironlinkv1.Command) *ironlinkv1.CommandResult
	// Logf, when set, receives link events.
	Logf func(format string, args ...any)
	// MaxBackoff bounds the reconnect delay (default 500 ms, full jitter from 20 ms).
	MaxBackoff time.Duration
	// ClockOffset is added to the satellite's clock for every time it
	// sends (observed, transition and heartbeat times): a satellite whose
	// clock runs ahead (> 0) or behind (< 0).
	ClockOffset time.Duration
	// HeartbeatInterval is how often the satellite sends a heartbeat
	// (default 1 s).
	HeartbeatInterval time.Duration
	// DialOptions replace the default plaintext dial options (for an
	// in-memory hub with credentials, see test/grpctest).
	DialOptions []grpc.DialOption
}

// Change is one condition change the satellite sent.
type Change struct {
	Status, Reason, Message string
}

// Sat is a scripted satellite. Its methods are safe for concurrent use.
type Sat struct {
	cfg     Config
	bootID  string
	devices []string

	mu          sync.Mutex
	wake        chan struct{}
	producing   bool
	next        uint64                       // next sequence to number
	unacked     []*ironlinkv1.ConditionBatch // numbered, not acked, in order
	sentOnLink  int                          // unacked[:sentOnLink] sent on the current link
	lastAcked   uint64                       // highest sequence acked
	history     map[string][]Change          // device/type → every change sent, in order
	current     map[string]map[string]*ironlinkv1.Condition
	changeN     int                            // changes generated
	ackedDeltas int                            // condition changes in acked, non-duplicate batches
	dupAcks     int                            // acks marked duplicate
	links       int                            // Welcomes received
	replicas    map[string]int                 // Welcomes by replica
	errs        []error                        // protocol violations seen
	lastClock   time.Time                      // monotonic observed time
	results     []*ironlinkv1.CommandResult    // results whose send failed, for the next link
	resultsCh   chan *ironlinkv1.CommandResult // results of applied commands
	commands    map[string]int                 // command id → times received
	cmdFirst    map[string]time.Time           // command id → first receipt
	connected   bool
	linkErrs    []string
	devIdx      int
	snapshotSeq uint64
}

// New returns a scripted satellite with random device ids.
func New(cfg Config) *Sat {
	if cfg.Devices <= 0 {
		cfg.Devices = 10
	}
	if cfg.DevicesPerBatch <= 0 {
		cfg.DevicesPerBatch = 5
	}
	cfg.DevicesPerBatch = min(cfg.DevicesPerBatch, cfg.Devices)
	if cfg.Window <= 0 {
		cfg.Window = 4
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 500 * time.Millisecond
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = time.Second
	}
	var b [8]byte
	_, _ = crand.Read(b[:])
	s := &Sat{cfg: cfg, bootID: hex.EncodeToString(b[:]), next: 1, wake: make(chan struct{}, 1),
		history: map[string][]Change{}, current: map[string]map[string]*ironlinkv1.Condition{},
		replicas: map[string]int{}, commands: map[string]int{}, cmdFirst: map[string]time.Time{},
		resultsCh: make(chan *ironlinkv1.CommandResult, 4096)}
	for range cfg.Devices {
		s.devices = append(s.devices, uuid.NewString())
	}
	s.buildSnapshot()
	return s
}

// Site is the site name.
func (s *Sat) Site() string { return s.cfg.Site }

// Devices returns the device ids.
func (s *Sat) Devices() []string { return append([]string(nil), s.devices...) }

func (s *Sat) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf("satsim %s: "+format, append([]any{s.cfg.Site}, args...)...)
	}
}

func key(dev, typ string) string { return dev + "/" + typ }

// clock returns a strictly increasing UTC time with microsecond precision
// (PostgreSQL's). Callers hold s.mu.
func (s *Sat) clock() time.Time {
	t := time.Now().Add(s.cfg.ClockOffset).UTC().Truncate(time.Microsecond)
	if !t.After(s.lastClock) {
		t = s.lastClock.Add(time.Microsecond)
	}
	s.lastClock = t
	return t
}

// buildSnapshot numbers the initial full snapshot (every device, all seven
// conditions), split into batches of at most 500 devices.
func (s *Sat) buildSnapshot() {
	now := s.clock()
	id := hex.EncodeToString([]byte(s.bootID))[:16]
	var updates []*ironlinkv1.DeviceUpdate
	for _, d := range s.devices {
		u := &ironlinkv1.DeviceUpdate{DeviceId: d, ObservedTime: timestamppb.New(now),
			Facts: &ironlinkv1.DeviceFacts{Name: "scripted-" + d[:8], ProvisionState: "available"}}
		s.current[d] = map[string]*ironlinkv1.Condition{}
		for _, t := range condition.Types {
			c := &ironlinkv1.Condition{Type: string(t), Status: ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE,
				Reason: "Initial", Message: "initial snapshot", LastTransitionTime: timestamppb.New(now), ObservedTime: timestamppb.New(now)}
			u.Conditions = append(u.Conditions, c)
			s.current[d][string(t)] = c
			s.history[key(d, string(t))] = append(s.history[key(d, string(t))], Change{"True", "Initial", "initial snapshot"})
			s.changeN++
		}
		updates = append(updates, u)
	}
	for first := true; first || len(updates) > 0; first = false {
		n := min(len(updates), 500)
		s.unacked = append(s.unacked, &ironlinkv1.ConditionBatch{Sequence: s.next,
			Snapshot: &ironlinkv1.SnapshotPart{SnapshotId: id, Final: n == len(updates)}, Devices: updates[:n]})
		s.snapshotSeq = s.next
		s.next++
		updates = updates[n:]
	}
}

// newDeltaLocked numbers a new delta batch: DevicesPerBatch devices (round
// robin), each with one condition flipped to a fresh message.
func (s *Sat) newDeltaLocked() *ironlinkv1.ConditionBatch {
	now := s.clock()
	b := &ironlinkv1.ConditionBatch{Sequence: s.next}
	s.next++
	for range s.cfg.DevicesPerBatch {
		d := s.devices[s.devIdx%len(s.devices)]
		s.devIdx++
		s.changeN++
		t := condition.Types[s.changeN%len(condition.Types)]
		old := s.current[d][string(t)]
		st, reason := ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE, "ScriptedFalse"
		if old.GetStatus() == ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE {
			st, reason = ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE, "ScriptedTrue"
		}
		c := &ironlinkv1.Condition{Type: string(t), Status: st, Reason: reason,
			Message:            fmt.Sprintf("change %d", s.changeN),
			LastTransitionTime: timestamppb.New(now), ObservedTime: timestamppb.New(now)}
		s.current[d][string(t)] = c
		stName := "True"
		if st == ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE {
			stName = "False"
		}
		s.history[key(d, string(t))] = append(s.history[key(d, string(t))], Change{stName, reason, c.Message})
		b.Devices = append(b.Devices, &ironlinkv1.DeviceUpdate{DeviceId: d, ObservedTime: timestamppb.New(now),
			Conditions: []*ironlinkv1.Condition{c}})
	}
	s.unacked = append(s.unacked, b)
	return b
}

func (s *Sat) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Produce starts (true) or stops (false) sending new delta batches.
func (s *Sat) Produce(on bool) {
	s.mu.Lock()
	s.producing = on
	s.mu.Unlock()
	s.signal()
}

// AddDeltas numbers n more delta batches now (sent as the window allows).
func (s *Sat) AddDeltas(n int) {
	s.mu.Lock()
	for range n {
		s.newDeltaLocked()
	}
	s.mu.Unlock()
	s.signal()
}

// Stats is a snapshot of the satellite's counters.
type Stats struct {
	LastSent, LastAcked uint64
	Unacked             int
	AckedDeltas         int
	DupAcks             int
	Links               int
	Replicas            map[string]int
	Errors              []error
	Connected           bool
}

// Stats returns the counters.
func (s *Sat) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := map[string]int{}
	for k, v := range s.replicas {
		r[k] = v
	}
	return Stats{LastSent: s.next - 1, LastAcked: s.lastAcked, Unacked: len(s.unacked), AckedDeltas: s.ackedDeltas,
		DupAcks: s.dupAcks, Links: s.links, Replicas: r, Errors: append([]error(nil), s.errs...), Connected: s.connected}
}

// CommandsReceived returns how often each command id was received.
func (s *Sat) CommandsReceived() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.commands {
		out[k] = v
	}
	return out
}

func (s *Sat) violation(format string, args ...any) {
	err := fmt.Errorf("site %s: "+format, append([]any{s.cfg.Site}, args...)...)
	s.errs = append(s.errs, err)
	s.logf("PROTOCOL VIOLATION: %v", err)
}

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

func (s *Sat) session(ctx context.Context, api ironlinkv1.LinkServiceClient) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := api.Connect(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	hello := &ironlinkv1.Hello{Site: s.cfg.Site, BootId: s.bootID, Version: "satsim", LastSequenceSent: s.next - 1}
	s.mu.Unlock()
	if err := stream.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Hello{Hello: hello}}); err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	w := first.GetWelcome()
	if w == nil {
		return errors.New("no welcome")
	}
	s.mu.Lock()
	last := w.GetLastCommittedSequence()
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
	pending := s.results
	s.results = nil
	s.mu.Unlock()
	s.logf("link up: replica %s epoch %d hub last %d", w.GetReplica(), w.GetEpoch(), last)

	msgs := make(chan *ironlinkv1.ConnectResponse)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	sendResult := func(r *ironlinkv1.CommandResult) error {
		if err := stream.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_CommandResult{CommandResult: r}}); err != nil {
			s.mu.Lock()
			s.results = append(s.results, r) // for the next link
			s.mu.Unlock()
			return err
		}
		return nil
	}
	for i, r := range pending {
		if err := sendResult(r); err != nil {
			s.mu.Lock()
			s.results = append(s.results, pending[i+1:]...)
			s.mu.Unlock()
			return err
		}
	}
	fill := func() error {
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
				}
			}
			s.mu.Unlock()
			if b == nil {
				return nil
			}
			if err := stream.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Batch{Batch: b}}); err != nil {
				return err
			}
		}
	}
	tick := time.NewTicker(s.cfg.HeartbeatInterval)
	defer tick.Stop()
	for {
		if err := fill(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			_ = stream.CloseSend()
			return ctx.Err()
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return errors.New("hub closed the link")
			}
			return err
		case <-s.wake:
		case <-tick.C:
			if err := stream.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Heartbeat{
				Heartbeat: &ironlinkv1.Heartbeat{SentTime: timestamppb.New(time.Now().Add(s.cfg.ClockOffset))}}}); err != nil {
				return err
			}
		case r := <-s.resultsCh:
			if err := sendResult(r); err != nil {
				return err
			}
		case m := <-msgs:
			switch msg := m.GetMsg().(type) {
			case *ironlinkv1.ConnectResponse_Ack:
				s.ack(msg.Ack)
			case *ironlinkv1.ConnectResponse_Command:
				cmd := msg.Command
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
	}
}

func (s *Sat) countAckedLocked(b *ironlinkv1.ConditionBatch, dup bool) {
	if dup || b.GetSnapshot() != nil {
		return
	}
	for _, d := range b.GetDevices() {
		s.ackedDeltas += len(d.GetConditions())
	}
}

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
	for i < len(s.unacked) && s.unacked[i].GetSequence() <= seq {
		s.countAckedLocked(s.unacked[i], a.GetDuplicate())
		i++
	}
	s.unacked = s.unacked[i:]
	s.sentOnLink = max(s.sentOnLink-i, 0)
	s.lastAcked = max(s.lastAcked, seq)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

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

// Verify checks the hub's tables for this site against what was sent:
// sites.last_sequence equals the last sequence sent (all acked), every
// device exists and is not removed, each (device, condition type) has
// exactly the history rows of the changes sent, in order (none lost, none
// doubled), and the current condition is the last one sent.
func (s *Sat) Verify(ctx context.Context, pool *pgxpool.Pool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if len(s.errs) > 0 {
		errs = append(errs, s.errs...)
	}
	var lastSeq int64
	if err := pool.QueryRow(ctx, `SELECT last_sequence FROM sites WHERE name = $1`, s.cfg.Site).Scan(&lastSeq); err != nil {
		return fmt.Errorf("site %s: %w", s.cfg.Site, err)
	}
	if uint64(lastSeq) != s.next-1 || s.lastAcked != s.next-1 {
		errs = append(errs, fmt.Errorf("site %s: hub last_sequence %d, satellite sent up to %d and got acks up to %d", s.cfg.Site, lastSeq, s.next-1, s.lastAcked))
	}
	rows, err := pool.Query(ctx, `
		SELECT h.device_id::text, h.type, h.status, h.reason, h.message
		FROM condition_history h JOIN devices d ON d.id = h.device_id
		WHERE d.site = $1 ORDER BY h.id`, s.cfg.Site)
	if err != nil {
		return err
	}
	got := map[string][]Change{}
	for rows.Next() {
		var dev, typ string
		var c Change
		if err := rows.Scan(&dev, &typ, &c.Status, &c.Reason, &c.Message); err != nil {
			rows.Close()
			return err
		}
		got[key(dev, typ)] = append(got[key(dev, typ)], c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	bad := 0
	for k, want := range s.history {
		g := got[k]
		if !equalChanges(g, want) {
			bad++
			if bad <= 5 {
				errs = append(errs, fmt.Errorf("site %s %s: history has %d rows, sent %d changes (first difference: %s)", s.cfg.Site, k, len(g), len(want), firstDiff(g, want)))
			}
		}
	}
	for k := range got {
		if _, ok := s.history[k]; !ok {
			errs = append(errs, fmt.Errorf("site %s: history rows for %s that was never sent", s.cfg.Site, k))
		}
	}
	if bad > 5 {
		errs = append(errs, fmt.Errorf("site %s: %d (device, type) histories differ in all", s.cfg.Site, bad))
	}
	var removed, devices int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE removed), count(*) FROM devices WHERE site = $1`, s.cfg.Site).Scan(&removed, &devices); err != nil {
		return err
	}
	if removed != 0 || devices != len(s.devices) {
		errs = append(errs, fmt.Errorf("site %s: %d devices (%d removed), want %d live", s.cfg.Site, devices, removed, len(s.devices)))
	}
	crow, err := pool.Query(ctx, `SELECT c.device_id::text, c.type, c.status, c.message FROM device_conditions c
		JOIN devices d ON d.id = c.device_id WHERE d.site = $1`, s.cfg.Site)
	if err != nil {
		return err
	}
	mismatch := 0
	for crow.Next() {
		var dev, typ, st, msg string
		if err := crow.Scan(&dev, &typ, &st, &msg); err != nil {
			crow.Close()
			return err
		}
		want := s.current[dev][typ]
		if want == nil || want.GetMessage() != msg {
			mismatch++
		}
	}
	crow.Close()
	if mismatch > 0 {
		errs = append(errs, fmt.Errorf("site %s: %d current conditions differ from the last sent", s.cfg.Site, mismatch))
	}
	return errors.Join(errs...)
}

func equalChanges(a, b []Change) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func firstDiff(got, want []Change) string {
	for i := range max(len(got), len(want)) {
		var g, w any = "nothing", "nothing"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("row %d: hub %v, sent %v", i, g, w)
		}
	}
	return "none"
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

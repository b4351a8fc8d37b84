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
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
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
	sentAt      map[uint64]time.Time // sequence → first send (latency.go)
	latencies   []time.Duration      // send-to-ack of batches acked, not yet taken
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

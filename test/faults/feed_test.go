package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

// TestWatchFleetSurvivesHubKill: a WatchFleet stream on hub-a is cut by a
// SIGKILL of hub-a while quarantines and releases go through hub-b (and a
// scripted satellite applies them); resumed on hub-b from the last cursor
// it received, the feed continues exactly where it broke: the events before
// the kill and after the resume are, one for one, those of a watcher on
// hub-b that never broke. Nothing lost, nothing repeated.
func TestWatchFleetSurvivesHubKill(t *testing.T) { repeat(t, scenarioWatchFleetKill) }

// feedLog collects a WatchFleet stream's events in a goroutine.
type feedLog struct {
	mu     sync.Mutex
	first  string
	events []*ironlinkv1.WatchFleetResponse
	last   time.Time
	err    error
	done   chan struct{}
}

func follow(ctx context.Context, t *testing.T, fc ironlinkv1.FleetServiceClient, cursor string) *feedLog {
	t.Helper()
	s, err := fc.WatchFleet(ctx, &ironlinkv1.WatchFleetRequest{Cursor: cursor})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	l := &feedLog{first: m.GetCursor(), done: make(chan struct{}), last: time.Now()}
	go func() {
		defer close(l.done)
		for {
			m, err := s.Recv()
			l.mu.Lock()
			if err != nil {
				l.err = err
				l.mu.Unlock()
				return
			}
			if m.GetEvent() != nil {
				l.events = append(l.events, m)
				l.last = time.Now()
			}
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *feedLog) snapshot() ([]*ironlinkv1.WatchFleetResponse, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*ironlinkv1.WatchFleetResponse(nil), l.events...), l.last
}

func feedKey(m *ironlinkv1.WatchFleetResponse) string {
	e := m.GetEvent()
	if ds := e.GetDeviceStatus(); ds != nil {
		return fmt.Sprintf("%s status %s %s→%s", m.GetCursor(), ds.GetName(), ds.GetPreviousStatus(), ds.GetStatus())
	}
	cs := e.GetCommandState()
	return fmt.Sprintf("%s command %s %s→%s", m.GetCursor(), cs.GetCommand().GetCommandId(), cs.GetPreviousState(), cs.GetCommand().GetState())
}

func scenarioWatchFleetKill(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := pgtest.NewDatabase(t)
	a := startHub(t, db, "hub-a")
	b := startHub(t, db, "hub-b")
	fa, fb := harness.Fleet(t, a.Addr), harness.Fleet(t, b.Addr)

	ref := follow(ctx, t, fb, "")        // never breaks
	cut := follow(ctx, t, fa, ref.first) // hub-a is killed under it
	sat := satsim.New(satsim.Config{Site: "feed", Addr: b.Addr, Devices: 12, Logf: t.Logf})
	runSats(t, sat)
	var devs []string
	harness.Eventually(t, 30*time.Second, func() error {
		r, err := fb.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "feed"})
		if err != nil || len(r.GetDevices()) < 12 {
			return errorf("devices: %d, %v", len(r.GetDevices()), err)
		}
		devs = devs[:0]
		for _, d := range r.GetDevices() {
			devs = append(devs, d.GetDeviceId())
		}
		return nil
	})

	var created []string
	op := func(i int) {
		dev := devs[i%len(devs)]
		var cmd *ironlinkv1.OperatorCommand
		if (i/len(devs))%2 == 0 {
			r, err := fb.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: dev, Reason: fmt.Sprintf("op %d", i)})
			if err != nil {
				t.Fatal(err)
			}
			cmd = r.GetCommand()
		} else {
			r, err := fb.ReleaseDevice(ctx, &ironlinkv1.ReleaseDeviceRequest{DeviceId: dev, Reason: fmt.Sprintf("op %d", i)})
			if err != nil {
				t.Fatal(err)
			}
			cmd = r.GetCommand()
		}
		created = append(created, cmd.GetCommandId())
	}
	const ops = 48
	i := 0
	for ; i < ops/2; i++ {
		op(i)
	}
	harness.Eventually(t, 30*time.Second, func() error {
		if evs, _ := cut.snapshot(); len(evs) < 20 {
			return errorf("hub-a's watcher has %d events", len(evs))
		}
		return nil
	})
	a.Kill() // SIGKILL, mid-stream: writes continue on hub-b
	for ; i < ops; i++ {
		op(i)
	}
	<-cut.done
	before, _ := cut.snapshot()
	rest := follow(ctx, t, fb, before[len(before)-1].GetCursor())

	// Quiet: the satellite has answered every command and nothing new came for 3 s.
	var got, want []*ironlinkv1.WatchFleetResponse
	harness.Eventually(t, 60*time.Second, func() error {
		r, lastR := ref.snapshot()
		s, lastS := rest.snapshot()
		if time.Since(lastR) < 3*time.Second || time.Since(lastS) < 3*time.Second {
			return errorf("still streaming: %d and %d events", len(r), len(s))
		}
		got, want = append(before, s...), r
		if len(got) != len(want) {
			return errorf("resumed feed has %d events, the unbroken one %d", len(got), len(want))
		}
		return nil
	})
	seen := map[string]bool{}
	for k, m := range got {
		if feedKey(m) != feedKey(want[k]) {
			t.Fatalf("event %d: resumed %s, unbroken %s", k, feedKey(m), feedKey(want[k]))
		}
		if seen[m.GetCursor()] {
			t.Fatalf("cursor %s delivered twice", m.GetCursor())
		}
		seen[m.GetCursor()] = true
	}
	creations, succeeded := map[string]int{}, map[string]bool{}
	for _, m := range got {
		if cs := m.GetEvent().GetCommandState(); cs != nil {
			id := cs.GetCommand().GetCommandId()
			if cs.GetPreviousState() == ironlinkv1.CommandState_COMMAND_STATE_UNSPECIFIED {
				creations[id]++
			}
			if s := cs.GetCommand().GetState(); s == ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED || s == ironlinkv1.CommandState_COMMAND_STATE_SUPERSEDED {
				succeeded[id] = true
			}
		}
	}
	for _, id := range created {
		if creations[id] != 1 || !succeeded[id] {
			t.Errorf("command %s: %d creation events, finished in the feed: %v", id, creations[id], succeeded[id])
		}
	}
	t.Logf("%d events before hub-a was killed, %d after resuming on hub-b, %d commands", len(before), len(got)-len(before), len(created))
}

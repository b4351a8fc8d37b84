package faults

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

// Fairness scenario sizes: fairVictims sites each send a batch of
// fairVictimBatch device updates every fairTick; the flooding site sends
// one of fairFloodBatch (100× as many) at the same ticks, with a window of
// fairFloodWindow batches unacknowledged.
const (
	fairVictims     = 4
	fairVictimBatch = 1
	fairTick        = 250 * time.Millisecond
	fairFloodBatch  = 100 * fairVictimBatch
	fairFloodWindow = 16
	fairPhase       = 10 * time.Second
	fairQuarantines = 6
)

// TestFloodingSatelliteDoesNotSlowOthers (issue 27 deliverable 3): one
// site's satellite sends 100× the condition changes of each other site (a
// resync storm, a bug) while four other sites send their usual trickle
// and an operator quarantines and releases their devices. The other sites'
// commit latency (batch sent → ack, which the hub sends after its commit)
// and quarantine latency (QuarantineDevice → SUCCEEDED) with the flood are
// compared with the same figures measured without it in the same run: the
// medians must stay under 2×. Every batch of every site is committed
// exactly once. The figures are printed.
func TestFloodingSatelliteDoesNotSlowOthers(t *testing.T) { repeat(t, scenarioFairness) }

func scenarioFairness(t *testing.T) {
	db, pool := newDatabase(t)
	hub := startHub(t, db, "hub-a", "--log-level", "info")
	fc := harness.Fleet(t, hub.Addr)
	var victims []*satsim.Sat
	for i := range fairVictims {
		victims = append(victims, satsim.New(satsim.Config{Site: "calm-" + string(rune('a'+i)), Addr: hub.Addr,
			Devices: 50, DevicesPerBatch: fairVictimBatch, Window: 4}))
	}
	flood := satsim.New(satsim.Config{Site: "storm", Addr: hub.Addr, Devices: 4000, DevicesPerBatch: fairFloodBatch, Window: fairFloodWindow})
	runSats(t, append(slices.Clone(victims), flood)...)
	harness.Eventually(t, 60*time.Second, func() error {
		for _, s := range append(slices.Clone(victims), flood) {
			if st := s.Stats(); st.LastAcked < 1 {
				return errorf("site %s: snapshot not acked", s.Site())
			}
		}
		return nil
	})

	base := fairPhaseRun(t, fc, victims, nil)
	stormFrom := flood.Stats().AckedDeltas
	flooded := fairPhaseRun(t, fc, victims, flood)
	stormDeltas := flood.Stats().AckedDeltas - stormFrom

	victimRate := float64(fairVictimBatch) / fairTick.Seconds()
	stormRate := float64(stormDeltas) / fairPhase.Seconds()
	t.Logf("flooding site: %.0f device updates/s acked (%.0f× a calm site's %.0f/s)", stormRate, stormRate/victimRate, victimRate)
	t.Logf("calm sites' commit latency: p50 %s → %s (%.2f×), p90 %s → %s; %d → %d batches",
		base.commitP(50), flooded.commitP(50), ratio(flooded.commitP(50), base.commitP(50)),
		base.commitP(90), flooded.commitP(90), len(base.commit), len(flooded.commit))
	t.Logf("calm sites' quarantine latency: p50 %s → %s (%.2f×), max %s → %s",
		base.quarantineP(50), flooded.quarantineP(50), ratio(flooded.quarantineP(50), base.quarantineP(50)),
		base.quarantineP(100), flooded.quarantineP(100))
	if stormRate < 90*victimRate { // a tick or two lost to a slow machine
		t.Errorf("the flooding site reached only %.0f device updates/s, under 100× a calm site's %.0f/s: the scenario tested nothing", stormRate, victimRate)
	}
	if r := ratio(flooded.commitP(50), base.commitP(50)); r >= 2 {
		t.Errorf("the flood slowed the calm sites' median commit latency %.2f×, want under 2×", r)
	}
	if r := ratio(flooded.quarantineP(50), base.quarantineP(50)); r >= 2 {
		t.Errorf("the flood slowed the calm sites' median quarantine latency %.2f×, want under 2×", r)
	}
	drainAndVerify(t, pool, 60*time.Second, append(slices.Clone(victims), flood)...)
}

// fairFigures are one phase's latencies.
type fairFigures struct {
	commit, quarantine []time.Duration
}

func (f fairFigures) commitP(p int) time.Duration     { return percentile(f.commit, p) }
func (f fairFigures) quarantineP(p int) time.Duration { return percentile(f.quarantine, p) }

// fairPhaseRun runs one phase of fairPhase: the victims send a batch each
// every fairTick, fairQuarantines quarantine/release pairs run on their
// devices one after another, and flood (when not nil) sends its batch of
// 100× at every tick too. It returns the victims' commit latencies and the quarantine
// latencies.
func fairPhaseRun(t *testing.T, fc ironlinkv1.FleetServiceClient, victims []*satsim.Sat, flood *satsim.Sat) fairFigures {
	t.Helper()
	for _, v := range victims {
		v.TakeAckLatencies() // the earlier phase's tail
	}
	ctx, cancel := context.WithTimeout(context.Background(), fairPhase)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the calm sites' trickle
		defer wg.Done()
		tick := time.NewTicker(fairTick)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				for _, v := range victims {
					v.AddDeltas(1)
				}
				if flood != nil {
					flood.AddDeltas(1)
				}
			}
		}
	}()
	var f fairFigures
	for i := range fairQuarantines {
		dev := victims[i%len(victims)].Devices()[i]
		for _, quarantining := range []bool{true, false} {
			start := time.Now()
			var id string
			if quarantining {
				id = quarantine(t, fc, dev, "fault suite: fairness", 10*time.Second)
			} else {
				id = release(t, fc, dev, "fault suite: fairness", 10*time.Second)
			}
			f.quarantine = append(f.quarantine, succeededAfter(t, fc, id, start))
		}
	}
	<-ctx.Done()
	wg.Wait()
	for _, v := range victims {
		f.commit = append(f.commit, v.TakeAckLatencies()...)
	}
	return f
}

// succeededAfter polls the command every 5 ms (finer than waitCommand's
// 100 ms: the latencies compared are tens of milliseconds) until it
// SUCCEEDED and returns the time since start.
func succeededAfter(t *testing.T, fc ironlinkv1.FleetServiceClient, id string, start time.Time) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		r, err := fc.GetCommand(ctx, &ironlinkv1.GetCommandRequest{CommandId: id})
		if err != nil {
			t.Fatalf("command %s: %v", id, err)
		}
		if r.GetCommand().GetState() == ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED {
			return time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// percentile returns the p-th percentile (nearest rank) of d; 0 for none.
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p+99)/100 - 1
	return s[min(max(i, 0), len(s)-1)]
}

// ratio is a/b (0 when b is 0).
func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

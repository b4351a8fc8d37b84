package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/internal/condition"
)

// BenchmarkGroupCommitDeltas drives Store.ApplyBatch directly (no gRPC, no
// link) from 100 sites at once, each committing batches of 10 one-condition
// deltas one after another for 5 s: the store's own share of load (a).
// Reported: deltas/s and the mean group size.
func BenchmarkGroupCommitDeltas(b *testing.B) {
	ctx := context.Background()
	s, _ := newGroupStoreTB(b)
	const sites, perBatch, devices = 100, 10, 20
	var total atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(5 * time.Second)
	start := time.Now()
	for i := range sites {
		site := fmt.Sprintf("bench-%03d", i)
		sess, err := s.OpenLink(ctx, LinkHello{Site: site, BootID: "b", Replica: "r"})
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]string, devices)
			for d := range ids {
				ids[d] = uuid.NewString()
			}
			now := time.Now().UTC()
			snap := Batch{Sequence: 1}
			for _, id := range ids {
				snap.Devices = append(snap.Devices, DeviceUpdate{DeviceID: id, ObservedTime: now, Conditions: groupConds(now, "seed")})
			}
			if _, err := s.ApplyBatch(ctx, site, sess.Epoch, snap); err != nil {
				b.Error(err)
				return
			}
			n := 0
			for seq := uint64(2); time.Now().Before(deadline); seq++ {
				at := time.Now().UTC()
				bt := Batch{Sequence: seq}
				for range perBatch {
					n++
					c := groupConds(at, fmt.Sprint("change ", n))[n%len(condition.Types)]
					bt.Devices = append(bt.Devices, DeviceUpdate{DeviceID: ids[n%devices], ObservedTime: at, Conditions: []condition.Condition{c}})
				}
				if _, err := s.ApplyBatch(ctx, site, sess.Epoch, bt); err != nil {
					b.Error(err)
					return
				}
				total.Add(perBatch)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	groups, writes := s.GroupStats()
	b.ReportMetric(float64(total.Load())/el.Seconds(), "deltas/s")
	b.ReportMetric(float64(writes)/float64(groups), "writes/group")
}

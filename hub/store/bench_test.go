package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
)

// BenchmarkIngestSnapshot measures the hub committing a full snapshot of a
// 1,000-device site in batches of 500 (as the satellite sends it): every
// device new, seven conditions each, with condition and status history.
// Reported: rows/s (rows inserted or updated) and devices/s.
func BenchmarkIngestSnapshot(b *testing.B) {
	const devices, perBatch = 1000, 500
	ctx := context.Background()
	st, _ := newBenchStore(b)
	var rows int
	start := time.Now()
	for i := 0; i < b.N; i++ {
		site := fmt.Sprintf("bench-%d", i)
		sess, err := st.OpenLink(ctx, store.LinkHello{Site: site, Replica: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now().UTC()
		snap := uuid.NewString()[:8]
		for part := 0; part < devices/perBatch; part++ {
			batch := store.Batch{Sequence: uint64(part + 1), SnapshotID: snap, SnapshotFinal: part == devices/perBatch-1}
			for d := 0; d < perBatch; d++ {
				batch.Devices = append(batch.Devices, store.DeviceUpdate{DeviceID: uuid.NewString(), ObservedTime: now,
					Facts:      &store.Facts{Name: fmt.Sprintf("node-%04d", part*perBatch+d), ProvisionState: "available"},
					Conditions: conds(now, map[condition.Type]condition.Status{})})
			}
			res, err := st.ApplyBatch(ctx, site, sess.Epoch, batch)
			if err != nil {
				b.Fatal(err)
			}
			rows += res.RowsWritten
		}
	}
	el := time.Since(start).Seconds()
	b.ReportMetric(float64(rows)/el, "rows/s")
	b.ReportMetric(float64(devices*b.N)/el, "devices/s")
}

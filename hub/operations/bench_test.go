package operations_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// BenchmarkStartOperation1000 asks for one PROVIDE on each of 1000
// devices by UUID (validation, site binding, guards, one transaction) and,
// in the same run, the raw reference: the same 1000 rows inserted with one
// plain INSERT each in one transaction. It reports both and their ratio.
func BenchmarkStartOperation1000(b *testing.B) { benchStartOperation(b, 1000, b.N) }

// TestStartOperationOnManyDevices runs the benchmark's checks once at a
// small size (make test runs no benchmark): one PROVIDE per device for 20
// devices in one call, the raw inserts beside it.
func TestStartOperationOnManyDevices(t *testing.T) { benchStartOperation(t, 20, 1) }

func benchStartOperation(b testing.TB, n, runs int) {
	ctx := context.Background()
	log := testlog.New(b)
	st, url := storetest.New(b, log)
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "site-a", BootID: "b", Replica: "r", Capabilities: []string{"operations"}})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	devs := make([]string, n)
	ups := make([]store.DeviceUpdate, n)
	for i := range devs {
		devs[i] = uuid.NewString()
		ups[i] = store.DeviceUpdate{DeviceID: devs[i], ObservedTime: now, Facts: &store.Facts{ProvisionState: "manageable"},
			Conditions: []condition.Condition{{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}}}
	}
	if _, err := st.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 1, Devices: ups}); err != nil {
		b.Fatal(err)
	}
	srv := operations.NewServer(st, operations.Config{}, log)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	reset := func() {
		if _, err := conn.Exec(ctx, `DELETE FROM operations`); err != nil {
			b.Fatal(err)
		}
	}
	var api, raw time.Duration
	for range runs {
		reset()
		start := time.Now()
		r, err := srv.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE, Devices: devs, Reason: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		api += time.Since(start)
		if got, err := pgxCount(ctx, conn); err != nil || got != n || len(r.GetOperations()) != n {
			b.Fatalf("StartOperation on %d devices: %d operations answered, %d rows (%v)", n, len(r.GetOperations()), got, err)
		}
		reset()
		start = time.Now()
		tx, err := conn.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		group := uuid.NewString()
		for _, d := range devs {
			if _, err := tx.Exec(ctx, `INSERT INTO operations (group_id, site, device_id, kind, actor, reason) VALUES ($1, 'site-a', $2, 'PROVIDE', 'op', 'bench')`, group, d); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		raw += time.Since(start)
	}
	if got, err := pgxCount(ctx, conn); err != nil || got != n {
		b.Fatalf("%d operation rows after the raw inserts (%v), want %d", got, err, n)
	}
	if bb, ok := b.(*testing.B); ok {
		bb.ReportMetric(float64(api.Milliseconds())/float64(runs), "api-ms/op")
		bb.ReportMetric(float64(raw.Milliseconds())/float64(runs), "raw-ms/op")
		bb.ReportMetric(float64(api)/float64(raw), "ratio")
	}
}

func pgxCount(ctx context.Context, conn *pgx.Conn) (int, error) {
	var n int
	err := conn.QueryRow(ctx, `SELECT count(*) FROM operations`).Scan(&n)
	return n, err
}

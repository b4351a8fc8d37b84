package fleet_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/app"
	"github.com/ironlink/ironlink/hub/fleet"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/grpcraw"
	"github.com/ironlink/ironlink/internal/storetest"
)

// testHub is a hub's operator API served as hub/app serves it (the same
// NewGRPCServer: logging, recovery and decode interceptors, the same
// codec; authentication off, as with --no-auth) on bufconn, over a fresh
// migrated database seeded with site "demo" (devices Devices, the first one
// quarantined by Command) and site "empty" (linked, no devices).
type testHub struct {
	Store   *store.Store
	Fleet   ironlinkv1.FleetServiceClient
	Conn    *grpc.ClientConn
	Devices []string
	Command string
	Log     *lineLog
}

// lineLog is an io.Writer for slog that keeps the longest line it saw and
// the log text (up to 1 MiB).
type lineLog struct {
	mu      sync.Mutex
	longest int
	buf     bytes.Buffer
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range bytes.Split(p, []byte("\n")) {
		l.longest = max(l.longest, len(line))
	}
	if l.buf.Len() < 1<<20 {
		l.buf.Write(p[:min(len(p), 1<<20-l.buf.Len())])
	}
	return len(p), nil
}

// Longest is the length of the longest log line so far (bytes).
func (l *lineLog) Longest() int { l.mu.Lock(); defer l.mu.Unlock(); return l.longest }

func (l *lineLog) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.buf.String() }

func newTestHub(tb testing.TB) *testHub {
	tb.Helper()
	ctx := context.Background()
	ll := &lineLog{}
	log := slog.New(slog.NewTextHandler(ll, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st, url := storetest.New(tb, log)
	h := &testHub{Store: st, Log: ll}
	for _, site := range []string{"empty", "demo"} {
		if _, err := st.OpenLink(ctx, store.LinkHello{Site: site, Replica: "r"}); err != nil {
			tb.Fatal(err)
		}
	}
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "demo", Replica: "r"})
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now().UTC()
	var ups []store.DeviceUpdate
	for i := range 3 {
		id := uuid.NewString()
		h.Devices = append(h.Devices, id)
		ups = append(ups, store.DeviceUpdate{DeviceID: id, ObservedTime: now, Facts: &store.Facts{Name: fmt.Sprintf("node-%d", i)},
			Conditions: []condition.Condition{{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}}})
	}
	if _, err := st.ApplyBatch(ctx, "demo", sess.Epoch, store.Batch{Sequence: 1, Devices: ups}); err != nil {
		tb.Fatal(err)
	}
	cmd, err := st.SetDesiredImpairment(ctx, h.Devices[0], store.ImpairmentQuarantined, "ops", "GPU 3 throws Xid 79", fleet.SourceOperatorAPI)
	if err != nil {
		tb.Fatal(err)
	}
	h.Command = cmd.ID

	cfg, err := app.Options{DatabaseURL: url, NoAuth: true, Plaintext: true}.Validate()
	if err != nil {
		tb.Fatal(err)
	}
	srv := app.NewGRPCServer(cfg, log)
	ironlinkv1.RegisterFleetServiceServer(srv, fleet.NewServer(st, nil, log.With("component", "fleet")))
	lis := bufconn.Listen(4 << 20)
	go func() { _ = srv.Serve(lis) }()
	tb.Cleanup(srv.Stop)
	cc, err := grpc.NewClient("passthrough:///hub",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(grpcraw.Codec{}), grpc.MaxCallSendMsgSize(8<<20)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cc.Close() })
	h.Conn, h.Fleet = cc, ironlinkv1.NewFleetServiceClient(cc)
	return h
}

// Raw calls method with body as the request's wire bytes (which may be
// anything, e.g. a string field that is not UTF-8) and decodes the reply
// into out.
func (h *testHub) Raw(ctx context.Context, method string, body []byte, out any) error {
	return h.Conn.Invoke(ctx, method, &body, out)
}

// tableChecksum is a signature of every table of the hub's schema: its
// row count and the newest xmin among its rows. Any insert, update (even one
// that rewrites equal values) or delete changes it, since PostgreSQL gives
// every written row version the writing transaction's id, and ids only grow;
// it costs one scan per table, without hashing or sorting rows, so the
// fuzz targets can afford it on every call. Equal before and after a call
// means the call wrote nothing.
func tableChecksum(tb testing.TB, pool *pgxpool.Pool) string {
	tb.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`)
	if err != nil {
		tb.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			tb.Fatal(err)
		}
		tables = append(tables, n)
	}
	if err := rows.Err(); err != nil || len(tables) == 0 {
		tb.Fatalf("tables %v: %v", tables, err)
	}
	var q []string
	for _, t := range tables {
		q = append(q, fmt.Sprintf(`SELECT '%[1]s:' || count(*) || ':' || COALESCE(max(xmin::text::bigint), 0) FROM %[1]s`, t))
	}
	var sum string
	if err := pool.QueryRow(ctx, `SELECT string_agg(x, ',') FROM (`+strings.Join(q, " UNION ALL ")+`) AS s(x)`).Scan(&sum); err != nil {
		tb.Fatal(err)
	}
	return sum
}

package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/app"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/promtest"
	"github.com/ironlink/ironlink/internal/testlog"
	"github.com/ironlink/ironlink/test/harness"
)

// hub is one in-process hub replica (plaintext, no authentication).
type hub struct {
	addr, admin string
	conn        *grpc.ClientConn
	done        chan error
}

// startHub runs app.Run over dbURL until the test ends; edit adjusts the
// configuration first.
func startHub(t *testing.T, dbURL, replica string, edit func(*app.Options)) *hub {
	t.Helper()
	opts := app.Options{DatabaseURL: dbURL, Replica: replica, Listen: harness.FreeAddr(t), AdminAddr: harness.FreeAddr(t),
		NoAuth: true, Plaintext: true, ShutdownGrace: 2 * time.Second}
	opts.Link.CommandSweep = 200 * time.Millisecond
	if edit != nil {
		edit(&opts)
	}
	cfg, err := opts.Validate()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &hub{addr: cfg.Listen, admin: "http://" + cfg.AdminAddr, done: make(chan error, 1)}
	log := testlog.New(t)
	go func() { h.done <- app.Run(ctx, cfg, log) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(15 * time.Second):
			t.Error("hub did not stop within 15 s")
		}
	})
	cc, err := grpc.NewClient(cfg.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	h.conn = cc
	waitFor(t, 20*time.Second, "admin listener up", func() error {
		select {
		case err := <-h.done:
			t.Fatalf("hub stopped: %v", err)
		default:
		}
		code, _, err := h.get("/healthz")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("/healthz %d", code)
		}
		return err
	})
	return h
}

// get fetches path from the admin listener.
func (h *hub) get(path string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(h.admin + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// grpcHealth asks the gRPC health service about service ("" = server).
func (h *hub) grpcHealth(service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	r, err := healthpb.NewHealthClient(h.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	return r.GetStatus(), err
}

// waitReady waits until /readyz answers want and the gRPC health of the
// server and of LinkService is wantGRPC.
func (h *hub) waitReady(t *testing.T, within time.Duration, want int, wantBody string, wantGRPC healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	waitFor(t, within, fmt.Sprintf("/readyz %d and gRPC health %v", want, wantGRPC), func() error {
		code, body, err := h.get("/readyz")
		if err != nil {
			return err
		}
		if code != want || !strings.Contains(body, wantBody) {
			return fmt.Errorf("/readyz %d %q", code, body)
		}
		for _, svc := range []string{"", "ironlink.v1.LinkService"} {
			st, err := h.grpcHealth(svc)
			if err != nil {
				return fmt.Errorf("gRPC health %q: %w", svc, err)
			}
			if st != wantGRPC {
				return fmt.Errorf("gRPC health %q: %v", svc, st)
			}
		}
		return nil
	})
}

func waitFor(t *testing.T, within time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// With PostgreSQL stopped the replica says so everywhere a probe or a
// balancer looks, while staying alive; once PostgreSQL is back it is ready
// again without a restart.
func TestReadinessFollowsPostgreSQL(t *testing.T) {
	pg := pgtest.StartCluster(t)
	db := pg.NewDatabase(t, "ironlink")
	h := startHub(t, db, "r1", nil)
	h.waitReady(t, 10*time.Second, http.StatusOK, "ready", healthpb.HealthCheckResponse_SERVING)
	if v, _ := promtest.Scrape(t, h.admin+"/metrics").Value("ironlink_hub_ready", "replica", "r1"); v != 1 {
		t.Fatalf("ironlink_hub_ready = %v while ready, want 1", v)
	}

	pg.Stop(t)
	stopped := time.Now()
	h.waitReady(t, 10*time.Second, http.StatusServiceUnavailable, "database unreachable", healthpb.HealthCheckResponse_NOT_SERVING)
	t.Logf("not ready %.1fs after PostgreSQL stopped", time.Since(stopped).Seconds())
	if code, _, err := h.get("/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("/healthz with PostgreSQL down: %d %v, want 200 (the process is alive)", code, err)
	}
	page := promtest.Scrape(t, h.admin+"/metrics")
	if v, _ := page.Value("ironlink_hub_ready", "replica", "r1"); v != 0 {
		t.Errorf("ironlink_hub_ready = %v with PostgreSQL down, want 0", v)
	}
	if v, _ := page.Value("ironlink_hub_database_scrape_ok"); v != 0 {
		t.Errorf("ironlink_hub_database_scrape_ok = %v with PostgreSQL down, want 0", v)
	}
	if v, _ := page.Value("ironlink_hub_database_errors_total", "kind", "connection"); v == 0 {
		t.Errorf("ironlink_hub_database_errors_total{kind=connection} = 0 with PostgreSQL down; series: %v", page.Series("ironlink_hub_database_errors_total"))
	}

	pg.Start(t)
	started := time.Now()
	h.waitReady(t, 15*time.Second, http.StatusOK, "ready", healthpb.HealthCheckResponse_SERVING)
	t.Logf("ready again %.1fs after PostgreSQL started", time.Since(started).Seconds())
}

// A replica started with --migrate=false on a schema that lacks its
// migrations is alive but not ready until `ironlink-hub migrate` has run.
func TestNotReadyUntilMigrated(t *testing.T) {
	db := pgtest.NewDatabase(t)
	h := startHub(t, db, "r1", func(o *app.Options) { o.SkipMigrate = true })
	h.waitReady(t, 10*time.Second, http.StatusServiceUnavailable, "schema", healthpb.HealthCheckResponse_NOT_SERVING)
	pgtest.Migrate(t, db)
	h.waitReady(t, 10*time.Second, http.StatusOK, "ready", healthpb.HealthCheckResponse_SERVING)
}

// satellite is a hand-driven link client.
type satellite struct {
	t      *testing.T
	stream ironlinkv1.LinkService_ConnectClient
}

func connect(t *testing.T, h *hub, site string) *satellite {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	s, err := ironlinkv1.NewLinkServiceClient(h.conn).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Hello{Hello: &ironlinkv1.Hello{
		Site: site, BootId: uuid.NewString(), Version: "test"}}}); err != nil {
		t.Fatal(err)
	}
	sat := &satellite{t: t, stream: s}
	if m := sat.recv(); m.GetWelcome() == nil {
		t.Fatalf("first message %v, want a welcome", m)
	}
	return sat
}

// recv returns the next message that is not a heartbeat or desired states.
func (s *satellite) recv() *ironlinkv1.ConnectResponse {
	s.t.Helper()
	for {
		m, err := s.stream.Recv()
		if err != nil {
			s.t.Fatalf("link: %v", err)
		}
		if m.GetHeartbeat() == nil && m.GetDesiredStates() == nil {
			return m
		}
	}
}

func (s *satellite) send(m *ironlinkv1.ConnectRequest) {
	s.t.Helper()
	if err := s.stream.Send(m); err != nil {
		s.t.Fatal(err)
	}
}

// After a link has sent a snapshot and a command went down and came back,
// /metrics shows what an operator alerts and graphs on, with the values
// that happened.
func TestMetricsAfterALink(t *testing.T) {
	db := pgtest.NewDatabase(t)
	h := startHub(t, db, "r1", nil)
	h.waitReady(t, 10*time.Second, http.StatusOK, "ready", healthpb.HealthCheckResponse_SERVING)
	sat := connect(t, h, "site-a")
	devices := []string{uuid.NewString(), uuid.NewString(), uuid.NewString()}
	var ups []*ironlinkv1.DeviceUpdate
	for _, id := range devices {
		ups = append(ups, &ironlinkv1.DeviceUpdate{DeviceId: id, ObservedTime: timestamppb.Now()})
	}
	sat.send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Batch{Batch: &ironlinkv1.ConditionBatch{
		Sequence: 1, Devices: ups, Snapshot: &ironlinkv1.SnapshotPart{SnapshotId: "s1", Final: true}}}})
	if m := sat.recv(); m.GetAck().GetSequence() != 1 {
		t.Fatalf("got %v, want the ack of batch 1", m)
	}
	sat.send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Batch{Batch: &ironlinkv1.ConditionBatch{
		Sequence: 2, Devices: ups[:1]}}})
	if m := sat.recv(); m.GetAck().GetSequence() != 2 {
		t.Fatalf("got %v, want the ack of batch 2", m)
	}

	// A quarantine is PENDING until the link sends it.
	fleet := ironlinkv1.NewFleetServiceClient(h.conn)
	ctx := context.Background()
	if _, err := fleet.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: devices[0], Reason: "Xid 79"}); err != nil {
		t.Fatal(err)
	}
	m := sat.recv()
	cmd := m.GetCommand()
	if cmd == nil {
		t.Fatalf("got %v, want the quarantine command", m)
	}
	// The hub marks it SENT just after sending it.
	waitFor(t, 5*time.Second, "the command counted as SENT", func() error {
		page := promtest.Scrape(t, h.admin+"/metrics")
		n, _ := page.Value("ironlink_hub_commands_open", "state", "SENT")
		age, _ := page.Value("ironlink_hub_command_oldest_age_seconds", "state", "SENT")
		pending, _ := page.Value("ironlink_hub_commands_open", "state", "PENDING")
		if n != 1 || age <= 0 || pending != 0 {
			return fmt.Errorf("commands_open{SENT} = %v, oldest_age{SENT} = %v, commands_open{PENDING} = %v; want 1, > 0, 0", n, age, pending)
		}
		return nil
	})
	time.Sleep(50 * time.Millisecond) // a round trip that takes a measurable time
	sat.send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_CommandResult{CommandResult: &ironlinkv1.CommandResult{
		CommandId: cmd.GetCommandId(), DeviceId: cmd.GetDeviceId(), Generation: cmd.GetGeneration(), Success: true}}})
	waitFor(t, 10*time.Second, "command SUCCEEDED", func() error {
		r, err := fleet.GetCommand(ctx, &ironlinkv1.GetCommandRequest{CommandId: cmd.GetCommandId()})
		if err != nil {
			return err
		}
		if r.GetCommand().GetState() != ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED {
			return fmt.Errorf("state %v", r.GetCommand().GetState())
		}
		return nil
	})

	page := promtest.Scrape(t, h.admin+"/metrics")
	cases := []struct {
		name   string
		series string
		labels []string
		check  func(float64) bool
		want   string
	}{
		{"one link open on this replica", "ironlink_hub_links_open", []string{"replica", "r1"}, eq(1), "1"},
		{"the site is linked to r1", "ironlink_hub_site_linked", []string{"site", "site-a", "link_replica", "r1"}, eq(1), "1"},
		{"the database sees r1 holding one link", "ironlink_hub_replica_links", []string{"link_replica", "r1"}, eq(1), "1"},
		{"the site is not stale", "ironlink_hub_site_stale", []string{"site", "site-a"}, eq(0), "0"},
		{"the site was seen just now", "ironlink_hub_site_last_seen_timestamp_seconds", []string{"site", "site-a"},
			func(v float64) bool { return time.Since(time.UnixMilli(int64(v*1e3))) < time.Minute }, "within a minute"},
		{"one link opened", "ironlink_hub_links_opened_total", nil, eq(1), "1"},
		{"one snapshot batch", "ironlink_hub_batches_committed_total", []string{"kind", "snapshot", "duplicate", "false"}, eq(1), "1"},
		{"one delta batch", "ironlink_hub_batches_committed_total", []string{"kind", "delta", "duplicate", "false"}, eq(1), "1"},
		{"four device updates", "ironlink_hub_device_updates_committed_total", nil, eq(4), "4"},
		{"two commits timed", "ironlink_hub_batch_commit_duration_seconds", nil, eq(2), "count 2"},
		{"commit time measured", "ironlink_hub_batch_commit_duration_seconds_sum", nil, gt(0), "> 0"},
		{"one command sent", "ironlink_hub_commands_sent_total", []string{"redelivery", "false"}, eq(1), "1"},
		{"one success", "ironlink_hub_command_results_total", []string{"result", "succeeded"}, eq(1), "1"},
		{"one round trip timed", "ironlink_hub_command_round_trip_seconds", []string{"result", "succeeded"}, eq(1), "count 1"},
		{"round trip at least the 50 ms wait", "ironlink_hub_command_round_trip_seconds_sum", []string{"result", "succeeded"}, func(v float64) bool { return v >= 0.05 }, ">= 0.05"},
		{"nothing open any more", "ironlink_hub_commands_open", []string{"state", "SENT"}, eq(0), "0"},
		{"no oldest age without commands", "ironlink_hub_command_oldest_age_seconds", []string{"state", "PENDING"}, eq(0), "0"},
		{"the quarantine RPC counted", "grpc_server_handled_total", []string{"grpc_method", "QuarantineDevice", "grpc_code", "OK"}, eq(1), "1"},
		{"the RPC latency histogram", "grpc_server_handling_seconds", []string{"grpc_method", "QuarantineDevice"}, eq(1), "count 1"},
		{"the link stream started", "grpc_server_started_total", []string{"grpc_method", "Connect"}, eq(1), "1"},
		{"no database errors", "ironlink_hub_database_errors_total", nil, eq(0), "0"},
		{"the scrape read the database", "ironlink_hub_database_scrape_ok", nil, eq(1), "1"},
		{"ready", "ironlink_hub_ready", nil, eq(1), "1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := page.Value(tc.series, tc.labels...)
			if !ok || !tc.check(v) {
				t.Errorf("%s%v = %v (present %v), want %s; series: %v", tc.series, tc.labels, v, ok, tc.want, page.Series(strings.TrimSuffix(tc.series, "_sum")))
			}
		})
	}

	// A second link of the same site supersedes the first.
	_ = connect(t, h, "site-a")
	_, err := sat.stream.Recv()
	for err == nil {
		_, err = sat.stream.Recv()
	}
	if status.Code(err) != codes.Aborted {
		t.Fatalf("first link ended with %v, want Aborted", err)
	}
	waitFor(t, 5*time.Second, "superseded link counted", func() error {
		page := promtest.Scrape(t, h.admin+"/metrics")
		v, _ := page.Value("ironlink_hub_links_ended_total", "reason", "superseded")
		open, _ := page.Value("ironlink_hub_links_open")
		if v != 1 || open != 1 {
			return fmt.Errorf("links_ended_total{reason=superseded} = %v, links_open = %v; want 1 and 1", v, open)
		}
		return nil
	})
}

func eq(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
func gt(min float64) func(float64) bool  { return func(v float64) bool { return v > min } }

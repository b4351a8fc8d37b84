package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/app"
	"github.com/ironlink/ironlink/hub/link"
)

// The raw gRPC ceiling of the link (issue 26 item 5): a plain gRPC server
// speaking just enough of LinkService — Hello → Welcome, a heartbeat at
// the hub's default interval, everything the satellite sends read and
// dropped, commands pushed and their results awaited — with the hub's own
// transport options (app.LinkStreamWindow and the constants beside it) and
// nothing else: no database, no fencing, no queues. Idle links measure its
// process's memory per link (a child process: the test binary re-executed
// with rawGRPCEnv set); quarantine measures a command's round trip through
// it in the benchmark's own process.

// rawGRPCEnv, when set in the environment of the test binary, makes it
// serve the raw link server (see serveRawGRPC) instead of running tests.
const rawGRPCEnv = "IRONLINK_BENCH_RAW_GRPC"

// rawLinkServer is the raw LinkService. Its zero value is not ready: use
// newRawLinkServer.
type rawLinkServer struct {
	ironlinkv1.UnimplementedLinkServiceServer
	mu      sync.Mutex
	streams map[string]chan *ironlinkv1.ConnectResponse // by site
	pending map[string]chan struct{}                    // by command id
}

func newRawLinkServer() *rawLinkServer {
	return &rawLinkServer{streams: map[string]chan *ironlinkv1.ConnectResponse{}, pending: map[string]chan struct{}{}}
}

// Connect answers the Hello with a Welcome, then sends heartbeats and
// pushed commands from one goroutine while this one reads.
func (s *rawLinkServer) Connect(stream ironlinkv1.LinkService_ConnectServer) error {
	hello, err := stream.Recv()
	if err != nil {
		return err
	}
	site := hello.GetHello().GetSite()
	if err := stream.Send(&ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Welcome{Welcome: &ironlinkv1.Welcome{
		Epoch: 1, HeartbeatIntervalSeconds: int32(link.DefaultHeartbeatInterval / time.Second)}}}); err != nil {
		return err
	}
	out := make(chan *ironlinkv1.ConnectResponse, 1)
	s.mu.Lock()
	s.streams[site] = out
	s.mu.Unlock()
	defer func() { s.mu.Lock(); delete(s.streams, site); s.mu.Unlock() }()
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(link.DefaultHeartbeatInterval)
		defer t.Stop()
		for {
			var m *ironlinkv1.ConnectResponse
			select {
			case <-done:
				return
			case m = <-out:
			case <-t.C:
				m = &ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Heartbeat{Heartbeat: &ironlinkv1.Heartbeat{SentTime: timestamppb.Now()}}}
			}
			if stream.Send(m) != nil {
				return
			}
		}
	}()
	for {
		m, err := stream.Recv()
		if err != nil {
			return nil
		}
		if r := m.GetCommandResult(); r != nil {
			s.mu.Lock()
			if ch := s.pending[r.GetCommandId()]; ch != nil {
				close(ch)
				delete(s.pending, r.GetCommandId())
			}
			s.mu.Unlock()
		}
	}
}

// command pushes c to site's link and returns a channel closed when its
// result arrives.
func (s *rawLinkServer) command(site string, c *ironlinkv1.Command) (<-chan struct{}, error) {
	ch := make(chan struct{})
	s.mu.Lock()
	out := s.streams[site]
	if out != nil {
		s.pending[c.GetCommandId()] = ch
	}
	s.mu.Unlock()
	if out == nil {
		return nil, fmt.Errorf("raw link server: site %s not linked", site)
	}
	out <- &ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Command{Command: c}}
	return ch, nil
}

// startRawGRPC serves srv on a free local port in this process and returns
// its address.
func startRawGRPC(tb testing.TB, srv *rawLinkServer) string {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	g := rawGRPCServer(srv)
	go g.Serve(lis)
	tb.Cleanup(g.Stop)
	return lis.Addr().String()
}

func rawGRPCServer(srv *rawLinkServer) *grpc.Server {
	g := grpc.NewServer(grpc.InitialWindowSize(app.LinkStreamWindow), grpc.InitialConnWindowSize(app.LinkConnWindow),
		grpc.ReadBufferSize(app.LinkReadBuffer), grpc.WriteBufferSize(app.LinkWriteBuffer))
	ironlinkv1.RegisterLinkServiceServer(g, srv)
	return g
}

// serveRawGRPC is the child process's main: it serves the raw link server,
// prints its address on a line of its own and serves until stdin closes.
func serveRawGRPC() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	g := rawGRPCServer(newRawLinkServer())
	go g.Serve(lis)
	fmt.Println(lis.Addr().String())
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// rawGRPCProcess is the raw link server in a child process.
type rawGRPCProcess struct {
	Addr string
	cmd  *exec.Cmd
}

// Pid is the child's process id.
func (p *rawGRPCProcess) Pid() int { return p.cmd.Process.Pid }

// startRawGRPCProcess re-executes the test binary as the raw link server,
// with env (NAME=value) added to its environment; it ends with the test.
func startRawGRPCProcess(tb testing.TB, env ...string) *rawGRPCProcess {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(append(os.Environ(), env...), rawGRPCEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("raw gRPC server: %v", err)
	}
	return &rawGRPCProcess{Addr: strings.TrimSpace(line), cmd: cmd}
}

// rawSatellite links site to the raw link server at addr and answers every
// command with success, until ctx ends.
func rawSatellite(ctx context.Context, tb testing.TB, addr, site string) {
	tb.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	stream, err := ironlinkv1.NewLinkServiceClient(cc).Connect(ctx)
	if err == nil {
		err = stream.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Hello{Hello: &ironlinkv1.Hello{Site: site}}})
	}
	if err == nil {
		_, err = stream.Recv() // the Welcome
	}
	if err != nil {
		cc.Close()
		tb.Fatalf("raw satellite %s: %v", site, err)
	}
	go func() {
		defer cc.Close()
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			if c := m.GetCommand(); c != nil {
				if stream.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_CommandResult{CommandResult: &ironlinkv1.CommandResult{
					CommandId: c.GetCommandId(), DeviceId: c.GetDeviceId(), Generation: c.GetGeneration(), Success: true}}}) != nil {
					return
				}
			}
		}
	}()
}

const (
	rawCommandInsert = `
		WITH d AS (UPDATE devices SET observed_at = now() WHERE id = $1 RETURNING id, site)
		INSERT INTO commands (device_id, site, generation, desired, actor, reason, source, state, sent_at)
		SELECT id, site, $2, 'QUARANTINED', 'raw', 'bench', 'raw', 'SENT', now() FROM d RETURNING id`
	rawCommandDone = `UPDATE commands SET state = 'SUCCEEDED', completed_at = now(), updated_at = now() WHERE id = $1`
)

// rawQuarantiners runs n raw operators until deadline on the raw database
// at url (its own connection each), each quarantining random devices of
// devs one after another: a command row written with its device's (one
// statement, committed), the command pushed over a raw gRPC link and its
// result awaited, the command marked SUCCEEDED. It returns the latencies.
func rawQuarantiners(tb testing.TB, url string, devs []string, n int, deadline time.Time) func() []time.Duration {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv := newRawLinkServer()
	addr := startRawGRPC(tb, srv)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.MaxConns = int32(n)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	for w := range n {
		rawSatellite(ctx, tb, addr, fmt.Sprintf("raw-q%d", w))
	}
	var mu sync.Mutex
	var lat []time.Duration
	var gen atomic.Int64
	var wg sync.WaitGroup
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				dev := devs[rand.IntN(len(devs))]
				t0 := time.Now()
				var id string
				err := pool.QueryRow(ctx, rawCommandInsert, dev, gen.Add(1)).Scan(&id)
				var done <-chan struct{}
				if err == nil {
					done, err = srv.command(fmt.Sprintf("raw-q%d", w), &ironlinkv1.Command{CommandId: id, DeviceId: dev,
						Desired: ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED})
				}
				if err == nil {
					<-done
					_, err = pool.Exec(ctx, rawCommandDone, id)
				}
				if err != nil {
					tb.Errorf("raw quarantine: %v", err)
					return
				}
				mu.Lock()
				lat = append(lat, time.Since(t0))
				mu.Unlock()
			}
		}()
	}
	return func() []time.Duration {
		wg.Wait()
		cancel()
		pool.Close()
		return lat
	}
}

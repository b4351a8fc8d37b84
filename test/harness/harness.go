// Package harness starts real ironlink processes for the end-to-end suite
// (test/e2e), the fault-injection suite (test/faults) and the link benchmark
// (test/bench): it builds the binaries once, runs them on loopback with their output captured, stops
// them gracefully (SIGTERM) or brutally (SIGKILL), and offers the small
// helpers those tests share (free ports, gRPC dialling, bounded waits,
// direct SQL reads of the hub's tables).
package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// Binaries names the built ironlink binaries.
type Binaries struct {
	// Dir holds ironlink-hub and ironlink-satellite.
	Dir string
}

// Hub is the path of ironlink-hub.
func (b Binaries) Hub() string { return filepath.Join(b.Dir, "ironlink-hub") }

// Satellite is the path of ironlink-satellite.
func (b Binaries) Satellite() string { return filepath.Join(b.Dir, "ironlink-satellite") }

// RepoRoot is the module root (two levels above this package's directory, test/harness).
func RepoRoot() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..")
}

// Main is a TestMain that needs the binaries: it builds them (and the
// commands in also, by package path, e.g. "./hub/cmd/ironlink") into *bins,
// runs the tests, removes them and exits.
func Main(m *testing.M, bins *Binaries, also ...string) {
	b, err := Build(also...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bins = b
	code := m.Run()
	os.RemoveAll(b.Dir)
	os.Exit(code)
}

// Build compiles ironlink-hub and ironlink-satellite (and the commands in
// also, each named after its directory) into a new temporary directory; the
// caller removes it (os.RemoveAll(b.Dir)).
func Build(also ...string) (Binaries, error) {
	dir, err := os.MkdirTemp("", "ironlink-test-bin-")
	if err != nil {
		return Binaries{}, err
	}
	pkgs := append([]string{"./hub/cmd/ironlink-hub", "./satellite/cmd/ironlink-satellite"}, also...)
	for _, pkg := range pkgs {
		b := struct{ name, pkg string }{filepath.Base(pkg), pkg}
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b.name), b.pkg)
		cmd.Dir = RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return Binaries{}, fmt.Errorf("build %s: %v\n%s", b.name, err, out)
		}
	}
	return Binaries{Dir: dir}, nil
}

// Proc is a running ironlink binary.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	exit error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Start runs path with args under name (for logs). The process is stopped
// (SIGTERM, then SIGKILL after 15 s) when the test ends, and the tail of its
// output is logged when the test failed.
func Start(tb testing.TB, name, path string, args ...string) *Proc {
	tb.Helper()
	p := &Proc{Name: name, out: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Env = os.Environ()
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	go func() { p.exit = p.cmd.Wait(); close(p.done) }()
	tb.Cleanup(func() {
		p.Stop(15 * time.Second)
		if tb.Failed() {
			tb.Logf("---- %s output (last 150 lines) ----\n%s", name, Tail(p.Output(), 150))
		}
	})
	return p
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Output returns everything the process printed so far.
func (p *Proc) Output() string { return p.out.String() }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitErr is the process's exit error (nil for status 0); valid after Done.
func (p *Proc) ExitErr() error { return p.exit }

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// KillNoWait sends SIGKILL without waiting (safe from hooks that must not block).
func (p *Proc) KillNoWait() { _ = p.cmd.Process.Signal(syscall.SIGKILL) }

// Term sends SIGTERM without waiting.
func (p *Proc) Term() { _ = p.cmd.Process.Signal(syscall.SIGTERM) }

// Stop sends SIGTERM and waits up to grace, then SIGKILLs.
func (p *Proc) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	p.Term()
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}

// WaitExit waits up to d for the process to exit; it reports whether it did.
func (p *Proc) WaitExit(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// Count returns how many output lines contain s.
func (p *Proc) Count(s string) int { return strings.Count(p.Output(), s) }

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Lines returns the output lines containing s.
func (p *Proc) Lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(p.Output()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// FreeAddr returns a free 127.0.0.1 port as host:port.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Dial returns a plaintext client connection to addr, closed at test end.
func Dial(tb testing.TB, addr string) *grpc.ClientConn {
	tb.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cc.Close() })
	return cc
}

// Fleet returns a FleetService client for addr.
func Fleet(tb testing.TB, addr string) ironlinkv1.FleetServiceClient {
	return ironlinkv1.NewFleetServiceClient(Dial(tb, addr))
}

// Eventually retries f every 100 ms until it returns nil or timeout passes,
// then fails the test with f's last error.
func Eventually(tb testing.TB, timeout time.Duration, f func() error) {
	tb.Helper()
	if err := Within(timeout, f); err != nil {
		tb.Fatalf("not true within %s: %v", timeout, err)
	}
}

// Within retries f every 100 ms until it returns nil (nil) or timeout passes
// (f's last error).
func Within(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Hub is a running ironlink-hub.
type Hub struct {
	*Proc
	Addr    string
	Replica string
	// AdminAddr is its admin listener (/metrics, /healthz, /readyz).
	AdminAddr string
}

// StartHub starts ironlink-hub (plaintext, --no-auth) on a free loopback
// port over dbURL with the given replica name and extra flags, and waits until its health service
// answers SERVING.
func StartHub(tb testing.TB, bins Binaries, dbURL, replica string, extra ...string) *Hub {
	tb.Helper()
	addr := FreeAddr(tb)
	return StartHubAt(tb, bins, addr, dbURL, replica, extra...)
}

// StartHubAt is StartHub on a given address (to restart a replica in place).
func StartHubAt(tb testing.TB, bins Binaries, addr, dbURL, replica string, extra ...string) *Hub {
	tb.Helper()
	// Authentication and TLS are covered by the e2e suite; the link's fault
	// handling is the same without them. Without authentication every
	// caller shares one operator bucket, and the benchmark polls far above
	// any human rate: the operator limits are off unless extra sets them.
	admin := FreeAddr(tb)
	args := append([]string{"--database-url", dbURL, "--listen", addr, "--replica", replica, "--no-auth", "--plaintext",
		"--operator-rate", "0", "--operator-max-streams", "0", "--admin-addr", admin}, extra...)
	p := Start(tb, "hub "+replica, bins.Hub(), args...)
	h := &Hub{Proc: p, Addr: addr, Replica: replica, AdminAddr: admin}
	cc := Dial(tb, addr)
	hc := healthpb.NewHealthClient(cc)
	if err := Within(30*time.Second, func() error {
		if p.Exited() {
			return errors.New("hub exited early")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		if r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("health %v", r.GetStatus())
		}
		return nil
	}); err != nil {
		tb.Fatalf("hub %s not serving: %v\n%s", replica, err, Tail(p.Output(), 50))
	}
	return h
}

// Pool opens a pgx pool on dbURL, closed at test end.
func Pool(tb testing.TB, dbURL string) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		tb.Fatalf("open pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

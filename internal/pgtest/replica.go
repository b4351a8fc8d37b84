package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Pair is a private primary and a streaming standby made from it with
// pg_basebackup, both on 127.0.0.1, for a test that kills the primary and
// promotes the standby (a database failover). Both are stopped and deleted
// when the test ends.
type Pair struct {
	// Primary is the cluster writes go to until Crash; Standby streams its
	// WAL and becomes writable after Promote.
	Primary, Standby *Cluster
}

// StartPair starts a primary, creates database dbName on it, and starts a
// standby streaming from it (pg_basebackup -R -X stream). With sync set,
// the primary's synchronous_standby_names is '*': a commit returns only
// once the standby has flushed its WAL, so nothing acknowledged is lost
// when the primary dies (the standby itself has no synchronous standby, so
// it keeps committing alone once promoted). It returns when the standby
// is streaming (and, with sync, is the synchronous one).
func StartPair(t *testing.T, dbName string, sync bool) *Pair {
	t.Helper()
	p := &Pair{Primary: StartCluster(t)}
	p.Primary.NewDatabase(t, dbName)
	p.Standby = newCluster(t)
	if out, err := p.Standby.run("pg_basebackup", "-h", "127.0.0.1", "-p", p.Primary.port, "-U", "postgres",
		"-D", p.Standby.data(), "-R", "-X", "stream", "-c", "fast"); err != nil {
		t.Fatalf("pgtest: pg_basebackup: %v\n%s", err, out)
	}
	p.Standby.Start(t)
	if sync {
		execAdmin(t, p.Primary, `ALTER SYSTEM SET synchronous_standby_names = '*'`)
		execAdmin(t, p.Primary, `SELECT pg_reload_conf()`)
	}
	want := "async"
	if sync {
		want = "sync"
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := withAdmin(t, p.Primary, func(ctx context.Context, c *pgx.Conn) error {
			return c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = $1`, want).Scan(&n)
		})
		if err == nil && n == 1 {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgtest: standby not streaming (%s) after 30 s: %v", want, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// URL returns a libpq keyword connection string naming both clusters,
// primary first, for database name with target_session_attrs=read-write:
// a client connecting with it reaches whichever of the two is writable.
func (p *Pair) URL(name string) string {
	return fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%s,%s user=postgres dbname=%s sslmode=disable target_session_attrs=read-write",
		p.Primary.port, p.Standby.port, name)
}

// Crash kills the primary's postmaster and every one of its processes with
// SIGKILL, as a host that dies would: no shutdown checkpoint, no goodbye to
// clients or to the standby (their sockets close as the processes die).
func (p *Pair) Crash(t *testing.T) {
	t.Helper()
	p.Primary.Crash(t)
}

// Promote promotes the standby (pg_ctl promote -w) and returns when it
// accepts writes.
func (p *Pair) Promote(t *testing.T) {
	t.Helper()
	if err := p.Standby.ctl("-w", "-t", "60", "promote"); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
}

// Crash sends SIGKILL to the cluster's postmaster and then to each of its
// child processes (found in /proc), so nothing is left to restart them.
func (c *Cluster) Crash(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(c.data(), "postmaster.pid"))
	if err != nil {
		t.Fatalf("pgtest: crash: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil {
		t.Fatalf("pgtest: crash: postmaster.pid: %v", err)
	}
	children := childrenOf(pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("pgtest: crash: kill postmaster %d: %v", pid, err)
	}
	for _, c := range append(children, childrenOf(pid)...) {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
}

// childrenOf lists the processes whose parent is pid (from /proc/*/stat).
func childrenOf(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, f := range stats {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(raw)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		if child, err := strconv.Atoi(strings.Fields(s)[0]); err == nil {
			out = append(out, child)
		}
	}
	return out
}

// execAdmin runs sql as postgres in the cluster's postgres database.
func execAdmin(t *testing.T, c *Cluster, sql string) {
	t.Helper()
	if err := withAdmin(t, c, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, sql)
		return err
	}); err != nil {
		t.Fatalf("pgtest: %s: %v", sql, err)
	}
}

// withAdmin runs fn on a connection to the cluster's postgres database.
func withAdmin(t *testing.T, c *Cluster, fn func(ctx context.Context, conn *pgx.Conn) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return fn(ctx, conn)
}

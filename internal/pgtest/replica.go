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
	// sync: the primary waits for the standby's flush at each commit
	// (StartPair's sync; Rebuild makes the new primary so again).
	sync bool
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
	p.sync = sync
	p.baseBackup(t)
	p.Standby.Start(t)
	p.streaming(t)
	return p
}

// baseBackup copies the primary into the standby's (empty) data directory
// with pg_basebackup -R -X stream, so that it starts as a standby of it.
func (p *Pair) baseBackup(t *testing.T) {
	t.Helper()
	if out, err := p.Standby.run("pg_basebackup", "-h", "127.0.0.1", "-p", p.Primary.port, "-U", "postgres",
		"-D", p.Standby.data(), "-R", "-X", "stream", "-c", "fast"); err != nil {
		t.Fatalf("pgtest: pg_basebackup: %v\n%s", err, out)
	}
}

// streaming makes a sync pair's primary wait for its standby at each
// commit (synchronous_standby_names '*') and returns once the standby
// streams (waitStreaming).
func (p *Pair) streaming(t *testing.T) {
	t.Helper()
	if p.sync {
		execAdmin(t, p.Primary, `ALTER SYSTEM SET synchronous_standby_names = '*'`)
		execAdmin(t, p.Primary, `SELECT pg_reload_conf()`)
	}
	p.waitStreaming(t)
}

// waitStreaming returns when the primary has one standby streaming, the
// synchronous one when the pair is sync; it fails the test after 60 s.
func (p *Pair) waitStreaming(t *testing.T) {
	t.Helper()
	want := "async"
	if p.sync {
		want = "sync"
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var n int
		err := withAdmin(t, p.Primary, func(ctx context.Context, c *pgx.Conn) error {
			return c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = $1`, want).Scan(&n)
		})
		if err == nil && n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgtest: standby not streaming (%s) after 60 s: %v", want, err)
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

// Rebuild makes a fresh streaming standby of the current primary (after
// Crash and Promote: the promoted one) on the port of the cluster that is
// not primary, and swaps the roles: the dead former primary's data
// directory is deleted, pg_basebackup -R -X stream copies the primary into
// it, and it starts with its former max_connections (which must not be
// below the primary's). The copy of postgresql.auto.conf loses
// synchronous_standby_names, so that the standby, once promoted, commits
// alone; a sync pair's new primary is made synchronous again (its
// synchronous_standby_names '*') and Rebuild returns once the standby
// streams as its synchronous one. Afterwards Primary is the promoted
// cluster and Standby the rebuilt one: URL, computed before or after,
// keeps reaching the writable one, and the pair can fail over again.
// Errors fail the test.
func (p *Pair) Rebuild(t *testing.T) {
	t.Helper()
	p.Primary, p.Standby = p.Standby, p.Primary
	if err := os.RemoveAll(p.Standby.data()); err != nil {
		t.Fatalf("pgtest: rebuild: %v", err)
	}
	p.baseBackup(t)
	auto := filepath.Join(p.Standby.data(), "postgresql.auto.conf")
	raw, err := os.ReadFile(auto)
	if err != nil {
		t.Fatalf("pgtest: rebuild: %v", err)
	}
	var keep []string
	for _, l := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "synchronous_standby_names") {
			keep = append(keep, l)
		}
	}
	if err := os.WriteFile(auto, []byte(strings.Join(keep, "\n")), 0o600); err != nil { // an existing file keeps its owner
		t.Fatalf("pgtest: rebuild: %v", err)
	}
	// The crashed postmaster's socket and its lock file are still in the
	// socket directory; the lock names a dead (or zombie) process, which
	// PostgreSQL may take for a live one: remove both.
	for _, f := range []string{".s.PGSQL." + p.Standby.port, ".s.PGSQL." + p.Standby.port + ".lock"} {
		if err := os.Remove(filepath.Join(p.Standby.dir, f)); err != nil && !os.IsNotExist(err) {
			t.Fatalf("pgtest: rebuild: %v", err)
		}
	}
	p.Standby.Start(t)
	p.streaming(t)
}

// SetMaxConnections restarts both clusters with max_connections n, the
// primary first and the standby once it has replayed the change (a hot
// standby may not run with fewer connections than its primary). A sync
// pair's commits wait while the standby restarts.
func (p *Pair) SetMaxConnections(t *testing.T, n int) {
	t.Helper()
	p.Primary.SetMaxConnections(t, n)
	p.waitStreaming(t)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var caughtUp bool
		err := withAdmin(t, p.Primary, func(ctx context.Context, c *pgx.Conn) error {
			return c.QueryRow(ctx, `SELECT coalesce(bool_and(replay_lsn >= pg_current_wal_lsn()), false) FROM pg_stat_replication`).Scan(&caughtUp)
		})
		if err == nil && caughtUp {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgtest: standby has not replayed the primary's WAL after 60 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.Standby.SetMaxConnections(t, n)
	p.waitStreaming(t)
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
	// Return once the postmaster is gone (or a zombie nobody reaped yet),
	// at most 10 s: a cluster started next on its port must not find it.
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && !strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
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

package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a private PostgreSQL cluster started from Debian's binaries
// for one test, so that the test may stop and restart it (to see what the
// hub does without its database) without touching the shared server.
type Cluster struct {
	bin, dir, port string
	asPostgres     bool
	// maxConns is max_connections (0: 200).
	maxConns int
}

// binDir returns the newest /usr/lib/postgresql/*/bin holding initdb.
func binDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi < vj
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	return ""
}

// StartCluster initdb's and starts a throwaway cluster on a free 127.0.0.1
// port (trust auth, fsync off); it is stopped and deleted when the test
// ends. Missing binaries fail the test (never skip) with what to install.
// Run as root, the cluster belongs to the postgres user.
func StartCluster(t *testing.T) *Cluster {
	t.Helper()
	c := newCluster(t)
	if out, err := c.run("initdb", "-D", c.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8"); err != nil {
		t.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	c.Start(t)
	return c
}

// newCluster makes the directory (owned by postgres when run as root) and
// picks the port of a cluster not yet initialised; it is stopped and
// deleted when the test ends.
func newCluster(t *testing.T) *Cluster {
	t.Helper()
	bin := binDir()
	if bin == "" {
		t.Fatal("pgtest: PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin (initdb, pg_ctl); install Debian's postgresql package")
	}
	dir, err := os.MkdirTemp("", "ironlink-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{bin: bin, dir: dir, asPostgres: os.Geteuid() == 0}
	if c.asPostgres {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("pgtest: running as root but there is no postgres user to own the private cluster: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	t.Cleanup(func() {
		_ = c.ctl("-m", "immediate", "-w", "stop")
		os.RemoveAll(dir)
	})
	return c
}

// Port returns the cluster's 127.0.0.1 port.
func (c *Cluster) Port() string { return c.port }

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) run(tool string, args ...string) (string, error) {
	path := filepath.Join(c.bin, tool)
	var cmd *exec.Cmd
	if c.asPostgres {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = c.dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *Cluster) ctl(args ...string) error {
	out, err := c.run("pg_ctl", append([]string{"-D", c.data()}, args...)...)
	if err != nil {
		return fmt.Errorf("pg_ctl %v: %v\n%s", args, err, out)
	}
	return nil
}

// Start starts the cluster (again) on its port and waits until it accepts
// connections.
func (c *Cluster) Start(t *testing.T) {
	t.Helper()
	maxConns := c.maxConns
	if maxConns == 0 {
		maxConns = 200
	}
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %s -k %s -c fsync=off -c max_connections=%d", c.port, c.dir, maxConns)
	if err := c.ctl("-l", filepath.Join(c.dir, "postgres.log"), "-w", "-t", "60", "-o", opts, "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
		t.Fatalf("pgtest: %v\n%s", err, log)
	}
}

// Stop stops the cluster with -m fast (clients are disconnected).
func (c *Cluster) Stop(t *testing.T) {
	t.Helper()
	if err := c.ctl("-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		t.Fatal(err)
	}
}

// SetMaxConnections restarts the cluster with max_connections n (of which
// superuser_reserved_connections, 3, are kept for superusers).
func (c *Cluster) SetMaxConnections(t *testing.T, n int) {
	t.Helper()
	c.maxConns = n
	c.Stop(t)
	c.Start(t)
}

// NewDatabase creates an empty database in the cluster and returns its URL.
func (c *Cluster) NewDatabase(t *testing.T, name string) string {
	t.Helper()
	admin := fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", c.port)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	return c.URL(name)
}

// URL returns the URL of database name in the cluster (user postgres).
func (c *Cluster) URL(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s/%s?sslmode=disable", c.port, name)
}

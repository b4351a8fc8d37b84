package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/test/harness"
)

// pgCluster is a private PostgreSQL cluster started from Debian's binaries
// for one test, so that the test may stop and restart it without touching
// the shared server other packages' tests use.
type pgCluster struct {
	bin, dir, port string
	asPostgres     bool
}

// pgBinDir returns the newest /usr/lib/postgresql/*/bin holding initdb.
func pgBinDir() string {
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

// startPGCluster initdb's and starts a throwaway cluster on a free
// 127.0.0.1 port (trust auth, fsync off); it is stopped and deleted when
// the test ends. Missing binaries fail the test with what to install.
func startPGCluster(t *testing.T) *pgCluster {
	t.Helper()
	bin := pgBinDir()
	if bin == "" {
		t.Fatal("PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin (initdb, pg_ctl): " +
			"this scenario restarts a private cluster; install Debian's postgresql package (apt-get install postgresql)")
	}
	dir, err := os.MkdirTemp("", "ironlink-faults-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c := &pgCluster{bin: bin, dir: dir, asPostgres: os.Geteuid() == 0}
	if c.asPostgres {
		// initdb refuses to run as root: the cluster belongs to "postgres".
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root but there is no postgres user to own the private cluster: %v", err)
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
	addr := harness.FreeAddr(t)
	c.port = addr[strings.LastIndex(addr, ":")+1:]
	t.Cleanup(func() {
		_ = c.ctl("-m", "immediate", "-w", "stop")
		os.RemoveAll(dir)
	})
	if out, err := c.run("initdb", "-D", c.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	c.start(t)
	return c
}

func (c *pgCluster) data() string { return filepath.Join(c.dir, "data") }

func (c *pgCluster) run(tool string, args ...string) (string, error) {
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

func (c *pgCluster) ctl(args ...string) error {
	out, err := c.run("pg_ctl", append([]string{"-D", c.data()}, args...)...)
	if err != nil {
		return fmt.Errorf("pg_ctl %v: %v\n%s", args, err, out)
	}
	return nil
}

// start starts the cluster and waits until it accepts connections.
func (c *pgCluster) start(t *testing.T) {
	t.Helper()
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %s -k %s -c fsync=off -c max_connections=200", c.port, c.dir)
	if err := c.ctl("-l", filepath.Join(c.dir, "postgres.log"), "-w", "-t", "60", "-o", opts, "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
		t.Fatalf("%v\n%s", err, log)
	}
}

// stop stops the cluster with -m fast (clients are disconnected).
func (c *pgCluster) stop(t *testing.T) {
	t.Helper()
	if err := c.ctl("-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		t.Fatal(err)
	}
}

// newDatabase creates a database in the cluster and returns its URL.
func (c *pgCluster) newDatabase(t *testing.T, name string) string {
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
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s/%s?sslmode=disable", c.port, name)
}

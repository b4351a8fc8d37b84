package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A row committed on the primary of a synchronous pair is on the standby
// after the primary is killed and the standby promoted, and the pair's
// multi-host URL reaches the promoted standby for writing; before the
// promotion it reaches nothing (the standby is read-only).
func TestPairFailover(t *testing.T) {
	p := StartPair(t, "pairtest", true)
	url := p.URL("pairtest")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE t (v int); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	p.Crash(t)
	if c, err := pgx.Connect(ctx, url); err == nil {
		c.Close(ctx)
		t.Fatal("the multi-host URL connected with the primary dead and the standby not promoted")
	} else {
		t.Logf("before promotion: %v", err)
	}
	p.Promote(t)
	conn, err = pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("after promotion: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO t VALUES (2)`); err != nil {
		t.Fatalf("write after promotion: %v", err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows after promotion: %d, %v; want 2", n, err)
	}
}

// After a failover, Rebuild puts a synchronous standby of the promoted
// primary on the dead primary's port: the URL taken before the first
// failover reaches the writable cluster through a second failover, and
// every committed row survives both.
func TestPairRebuildFailsOverAgain(t *testing.T) {
	p := StartPair(t, "pairtest", true)
	p.SetMaxConnections(t, 40)
	url := p.URL("pairtest")
	ports := []string{p.Primary.Port(), p.Standby.Port()}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	insert := func(v int) {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatalf("connect before inserting %d: %v", v, err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS t (v int)`); err != nil {
			t.Fatalf("create: %v", err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO t VALUES ($1)`, v); err != nil {
			t.Fatalf("insert %d: %v", v, err)
		}
	}
	insert(1)
	for round := 2; round <= 3; round++ {
		p.Crash(t)
		p.Promote(t)
		p.Rebuild(t)
		insert(round)
	}
	if got := []string{p.Primary.Port(), p.Standby.Port()}; got[0] != ports[0] || got[1] != ports[1] {
		t.Errorf("after two failovers primary, standby on ports %v, want %v (the roles swapped back)", got, ports)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n, maxConns int
	if err := conn.QueryRow(ctx, `SELECT count(*), current_setting('max_connections')::int FROM t`).Scan(&n, &maxConns); err != nil || n != 3 || maxConns != 40 {
		t.Fatalf("rows %d, max_connections %d (%v); want 3 rows, 40", n, maxConns, err)
	}
}

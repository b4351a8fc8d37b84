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

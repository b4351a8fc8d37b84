//go:build linux

package pgprimary_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/internal/pgprimary"
	"github.com/ironlink/ironlink/internal/pgtest"
)

// TestUserTimeoutDropsABlackholedConnection: PostgreSQL's host vanishes
// without closing its sockets (power lost, a network partition), modelled
// by an iptables rule dropping every packet to a private cluster's port.
// A query sent on a connection Configure set up then fails by itself with
// ETIMEDOUT once TCP_USER_TIMEOUT (shortened here to 2 s) has passed with
// the query unacknowledged — without it the kernel retransmits for about
// 15 minutes (tcp_retries2) and the query, having no deadline, waits as
// long. Needs root (or CAP_NET_ADMIN) for iptables: without root it skips
// and says so, except under CI=true, where it fails.
func TestUserTimeoutDropsABlackholedConnection(t *testing.T) {
	if os.Geteuid() != 0 && os.Getenv("CI") != "true" {
		t.Skip("needs root (CAP_NET_ADMIN) for iptables; under CI=true this is a failure, not a skip")
	}
	const short = 2 * time.Second
	defer pgprimary.SetUserTimeoutForTest(short)()

	pg := pgtest.StartCluster(t)
	url := pg.URL("postgres")
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pgprimary.Configure(&cfg.Config, url)
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var one int
	if err := conn.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
		t.Fatal(err)
	}

	rule := []string{"INPUT", "-i", "lo", "-p", "tcp", "--dport", pg.Port(), "-j", "DROP"}
	if out, err := exec.Command("iptables", append([]string{"-I"}, rule...)...).CombinedOutput(); err != nil {
		t.Fatalf("iptables -I %s (the test needs root or CAP_NET_ADMIN): %v: %s", strings.Join(rule, " "), err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("iptables", append([]string{"-D"}, rule...)...).CombinedOutput(); err != nil {
			t.Errorf("iptables -D %s: %v: %s", strings.Join(rule, " "), err, out)
		}
	})

	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- conn.QueryRow(ctx, `SELECT 1`).Scan(&one) }() // no deadline: only the kernel ends it
	select {
	case err = <-done:
	case <-time.After(short + 15*time.Second):
		t.Fatalf("a query on a blackholed connection still waits after %s: TCP_USER_TIMEOUT (%s) did not end it", time.Since(start).Round(time.Millisecond), short)
	}
	took := time.Since(start)
	if err == nil {
		t.Fatal("a query succeeded with every packet to PostgreSQL dropped")
	}
	if !errors.Is(err, syscall.ETIMEDOUT) {
		t.Errorf("the query failed with %v, want ETIMEDOUT (connection timed out)", err)
	}
	if took < short {
		t.Errorf("the query failed after %s, before TCP_USER_TIMEOUT (%s): %v", took, short, err)
	}
	t.Logf("blackholed: the query failed after %s (TCP_USER_TIMEOUT %s): %v", took.Round(time.Millisecond), short, err)
}

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestDatabaseAway: errors a waiting hub may see cured (PostgreSQL away,
// full or starting) are retried; a refused password, a missing database or
// a failed migration are not.
func TestDatabaseAway(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", fmt.Errorf("connect: %w", &net.OpError{Op: "dial", Err: errors.New("connection refused")}), true},
		{"too many clients", fmt.Errorf("connect: %w", &pgconn.PgError{Code: "53300"}), true},
		{"disk full", fmt.Errorf("apply migrations: %w", &pgconn.PgError{Code: "53100"}), true},
		{"starting up", &pgconn.PgError{Code: "57P03"}, true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"read-only standby", &pgconn.PgError{Code: "25006"}, true},
		{"connect timeout", fmt.Errorf("ping: %w", context.DeadlineExceeded), true},
		{"bad password", &pgconn.PgError{Code: "28P01"}, false},
		{"no database", &pgconn.PgError{Code: "3D000"}, false},
		{"migration syntax error", fmt.Errorf("apply migrations: %w", &pgconn.PgError{Code: "42601"}), false},
		{"other", errors.New("load migrations: bad file"), false},
	} {
		if got := databaseAway(c.err); got != c.want {
			t.Errorf("%s: databaseAway(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestRetryDatabaseGivesUpOnOtherErrors: an error databaseAway does not
// recognise ends the wait at once; a cancelled context ends it with the
// last error.
func TestRetryDatabaseGivesUpOnOtherErrors(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tries := 0
	bad := &pgconn.PgError{Code: "28P01"}
	if err := retryDatabase(context.Background(), log, "open", func() error { tries++; return bad }); !errors.Is(err, bad) || tries != 1 {
		t.Fatalf("bad password: %v after %d tries, want it after 1", err, tries)
	}
	ctx, cancel := context.WithCancel(context.Background())
	away := &pgconn.PgError{Code: "57P03"}
	err := retryDatabase(ctx, log, "open", func() error { cancel(); return away })
	if !errors.Is(err, away) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v, want the last error and the cancellation", err)
	}
}

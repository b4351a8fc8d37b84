package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ironlink/ironlink/internal/pgprimary"
)

// Start-up while PostgreSQL does not answer (issue 27 deliverable 2): a
// hub started before its database (a node reboot, a failover in progress,
// every connection slot taken, the disk full) waits for it, retrying with
// a growing delay and one warning per try, instead of exiting and being
// restarted in a loop by its supervisor. An error that waiting cannot cure
// (a refused password, a missing database, a failed migration) still ends
// the start at once.
const (
	// DBRetryFirst is the delay before the second try.
	DBRetryFirst = time.Second
	// DBRetryMax bounds the delay between two tries.
	DBRetryMax = 15 * time.Second
	// dbPingTimeout bounds one connection attempt.
	dbPingTimeout = 10 * time.Second
)

// retryDatabase runs try until it succeeds, returns an error databaseAway
// does not recognise, or ctx ends (then it returns try's last error with
// ctx's). Each failed try is logged (what names the step) with the delay
// before the next; the first success after a failure is logged too.
func retryDatabase(ctx context.Context, log *slog.Logger, what string, try func() error) error {
	delay := DBRetryFirst
	for attempt := 1; ; attempt++ {
		err := try()
		if err == nil {
			if attempt > 1 {
				log.Info("PostgreSQL answers: start continues", "step", what, "attempts", attempt)
			}
			return nil
		}
		if !databaseAway(err) {
			return err
		}
		log.Warn("PostgreSQL does not answer at start: waiting for it (the hub is not ready until it does)",
			"step", what, "attempt", attempt, "retry_in", delay, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: waiting for PostgreSQL ended: %w (last error: %w)", what, context.Cause(ctx), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, DBRetryMax)
	}
}

// databaseAway reports whether err says PostgreSQL is away or out of room
// for now — a waiting hub may meet it answering later: connection
// exceptions (SQLSTATE class 08), insufficient resources (53: too many
// clients, disk full, out of memory), operator intervention (57P01-57P05:
// shutting down, starting up, recovering) and read-only transactions on a
// standby (25006), and a connection that could not be made at all (refused,
// timed out, name not resolved). Any other PostgreSQL error (a refused
// password, a missing database, a failed migration) is not.
func databaseAway(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		c := pgErr.Code
		return strings.HasPrefix(c, "08") || strings.HasPrefix(c, "53") || strings.HasPrefix(c, "57P") || c == "25006"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.As(err, &oe) || pgconn.Timeout(err) ||
		errors.Is(err, context.DeadlineExceeded)
}

// pingDatabase connects once to databaseURL (every host of a multi-host
// URL, the writable one first, as the store's pools do) and runs a ping.
func pingDatabase(ctx context.Context, databaseURL string) error {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("parse database URL: %w", err)
	}
	pgprimary.Configure(&cfg.Config, databaseURL)
	ctx, cancel := context.WithTimeout(ctx, dbPingTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.Ping(ctx); err != nil {
		return fmt.Errorf("ping PostgreSQL: %w", err)
	}
	return nil
}

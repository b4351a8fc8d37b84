// Package pgprimary keeps a pgx connection configuration on a writable
// PostgreSQL primary and makes a dead one noticed within seconds, so the
// hub rides a database failover: a multi-host connection string
// (host=a,b target_session_attrs=read-write, as libpq and pgx read it) or
// one address that a service moves (CloudNativePG's -rw service, Patroni
// behind HAProxy) reaches the new primary as soon as it is promoted, with
// no restart. See docs/howto/failover.md.
//
// Configure sets, on a parsed pgconn.Config:
//   - target_session_attrs=read-write unless the connection string names a
//     target_session_attrs itself: every new connection asks
//     `show transaction_read_only` and a standby is refused (with
//     ErrStandby in its error chain) so the next host is tried;
//   - a connect timeout (DefaultConnectTimeout) unless connect_timeout is
//     given, so a host that swallows packets does not stall the next one;
//   - a dialer with TCP keepalives (KeepAliveIdle, KeepAliveInterval,
//     KeepAliveCount) and, on Linux, TCP_USER_TIMEOUT (UserTimeout), so a
//     connection to a primary that vanished without a FIN or RST (host
//     down, network partition) fails within about 30 s instead of the
//     kernel's 15 minutes of retransmissions;
//   - idle_in_transaction_session_timeout (IdleInTransactionTimeout) unless
//     the connection string sets it: a hub stopped inside a transaction (a
//     paused VM, SIGSTOP, a process stalled in swap) loses that transaction
//     and its row locks after this long, so the other replicas' links are
//     not held behind it, and its commit fails when it runs again — it
//     writes nothing stale (issue 27; test/faults TestFrozenReplica).
package pgprimary

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrStandby: the server answered but is a standby (in recovery, read-only),
// not a primary; the hub cannot write to it. Found in the error chain of a
// connection refused by the read-write check and returned by callers that
// ask pg_is_in_recovery().
var ErrStandby = errors.New("PostgreSQL server is a standby (read-only), not the primary")

// Timeouts of the connections Configure sets up.
const (
	// DefaultConnectTimeout bounds each host's connection attempt (dial,
	// TLS, startup, the read-write check) when the connection string sets
	// no connect_timeout.
	DefaultConnectTimeout = 5 * time.Second
	// UserTimeout is TCP_USER_TIMEOUT: how long sent data may stay
	// unacknowledged before the kernel drops the connection.
	UserTimeout = 30 * time.Second
	// KeepAliveIdle is the idle time before the first TCP keepalive probe.
	KeepAliveIdle = 10 * time.Second
	// KeepAliveInterval is the time between unanswered keepalive probes.
	KeepAliveInterval = 5 * time.Second
	// KeepAliveCount is how many unanswered probes end the connection
	// (idle 10 s + 4 × 5 s = 30 s on an idle connection).
	KeepAliveCount = 4
	// IdleInTransactionTimeout is PostgreSQL's
	// idle_in_transaction_session_timeout for the hub's sessions: the
	// hub runs a transaction's statements back to back, so a session idle
	// this long inside one belongs to a stopped process.
	IdleInTransactionTimeout = 10 * time.Second
)

// idleParam is the run-time parameter IdleInTransactionTimeout sets.
const idleParam = "idle_in_transaction_session_timeout"

// Configure adjusts cfg, parsed from connString, as the package doc says.
// It leaves a target_session_attrs the string names (read-write, primary,
// any, …) as given, and ErrStandby is then still found for a refused
// read-only server.
func Configure(cfg *pgconn.Config, connString string) {
	if !strings.Contains(connString, "target_session_attrs") {
		cfg.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
	}
	if v := cfg.ValidateConnect; v != nil {
		cfg.ValidateConnect = func(ctx context.Context, c *pgconn.PgConn) error {
			err := v(ctx, c)
			if errors.Is(err, pgconn.ErrReadOnlyConnection) {
				return fmt.Errorf("%w: %w", ErrStandby, err)
			}
			return err
		}
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	cfg.DialFunc = Dialer(cfg.ConnectTimeout).DialContext
	if _, set := cfg.RuntimeParams[idleParam]; !set && !strings.Contains(connString, idleParam) {
		if cfg.RuntimeParams == nil {
			cfg.RuntimeParams = map[string]string{}
		}
		cfg.RuntimeParams[idleParam] = fmt.Sprint(IdleInTransactionTimeout.Milliseconds())
	}
}

// Dialer returns a dialer with connectTimeout, the package's TCP keepalives
// and, on Linux, TCP_USER_TIMEOUT set on every TCP socket it opens (Unix
// sockets are left alone).
func Dialer(connectTimeout time.Duration) *net.Dialer {
	return &net.Dialer{
		Timeout: connectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: KeepAliveIdle, Interval: KeepAliveInterval, Count: KeepAliveCount,
		},
		Control: setUserTimeout,
	}
}

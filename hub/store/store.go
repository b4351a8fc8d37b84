package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ironlink/ironlink/hub/store/notify"
	"github.com/ironlink/ironlink/internal/loggate"
	"github.com/ironlink/ironlink/internal/pgprimary"
	"github.com/ironlink/ironlink/migrations"
)

// Sentinel errors, returned wrapped.
var (
	// ErrNotFound: the device, command or site does not exist.
	ErrNotFound = errors.New("not found")
	// ErrFenced: a newer link for the site exists; this link's writes are refused.
	ErrFenced = errors.New("link superseded by a newer link for the site")
	// ErrWrongSite: a device or command a link message names belongs to
	// another site than the link's.
	ErrWrongSite = errors.New("device belongs to another site")
	// ErrMismatch: a message names ids that do not belong together (a
	// command result naming another device than the command's).
	ErrMismatch = errors.New("ids do not match")
)

// NotifyChannel is the PostgreSQL LISTEN/NOTIFY channel on which the hub
// announces new commands; the payload is the site name. It is a hint only:
// the periodic sweep is the guarantee.
const NotifyChannel = "ironlink_commands"

// PolicyNotifyChannel is the LISTEN/NOTIFY channel on which a status_history
// row entering FAULTED or MAINTENANCE is announced (a trigger, migration
// 00044; empty payload, one per transaction): the policy evaluator wakes on
// it (hub/policyrun Evaluator.Wake). A hint only: its interval is the
// guarantee.
const PolicyNotifyChannel = "ironlink_policy"

// Store is a handle on the hub database; safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	now  func() time.Time
	// group commits the condition batches and site-condition sets (group.go).
	group groupCommitter
	// conds keeps the current conditions of the sites whose links this
	// replica holds, for the group committer (groupcache.go).
	conds condCache

	// policyHint sends the group committer's policy hints, feedHint the
	// command path's change-feed hints (policyhint.go).
	policyHint, feedHint notifyHint

	// cmdPool is the command path's own pool (commandpool.go); nil: pool.
	cmdPool *pgxpool.Pool

	// notes is the replica's one LISTEN connection (Notifications).
	notes *notify.Dispatcher

	// groupFailedLog lets a failed group commit be logged at Warn at most
	// once a minute, the others at Debug: in a database outage every
	// link's retry fails a group (groupCommitter.commit).
	groupFailedLog *loggate.Gate
}

// Open connects a pgx pool to databaseURL (a PostgreSQL URL or key=value
// DSN, one host or several: host=a,b) and pings it. Every connection keeps
// to the primary (pgprimary.Configure: target_session_attrs=read-write
// unless the URL names one, a connect timeout, TCP keepalives and
// TCP_USER_TIMEOUT), so after a failover the pool, the command pool and
// the LISTEN connection reconnect to the promoted standby by themselves.
// It does not migrate; call Migrate first. opts adjust the pool
// (WithTracer).
func Open(ctx context.Context, databaseURL string, log *slog.Logger, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	pgprimary.Configure(&cfg.ConnConfig.Config, databaseURL)
	for _, o := range opts {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	s := &Store{pool: pool, log: log, now: time.Now, groupFailedLog: loggate.New()}
	s.notes = notify.New(func(ctx context.Context) (*pgx.Conn, error) {
		return pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	}, []string{NotifyChannel, OperationsChannel, FeedNotifyChannel, PolicyNotifyChannel}, log)
	return s, nil
}

// Notifications returns this replica's LISTEN dispatcher: one dedicated
// connection (outside the pool, made with the pool's settings) on
// NotifyChannel, OperationsChannel, FeedNotifyChannel and
// PolicyNotifyChannel, running while
// anything is subscribed.
func (s *Store) Notifications() *notify.Dispatcher { return s.notes }

// Pool returns the underlying pool (for the history partitions keeper,
// the policy evaluator's leader lock, the fleet view's own reads, and tests).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close ends the LISTEN dispatcher's subscriptions and closes the pool
// (and the command pool, when open).
func (s *Store) Close() {
	s.notes.Close()
	if s.cmdPool != nil {
		s.cmdPool.Close()
	}
	s.pool.Close()
}

// Migrate applies every pending migration (migrations.Up: goose, under a
// PostgreSQL advisory lock so replicas starting together migrate once). It
// returns the versions applied (empty when up to date).
func Migrate(ctx context.Context, databaseURL string) ([]int64, error) {
	return migrations.Up(ctx, databaseURL)
}

// inTx runs fn in a transaction, retrying it (up to 3 attempts in all) when
// PostgreSQL aborts it as a deadlock victim (40P01) or a serialization
// failure (40001); fn must be safe to run again (it is: it only talks to
// the transaction).
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.inTxOn(ctx, s.pool, fn)
}

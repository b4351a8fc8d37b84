// Package pglisten runs one PostgreSQL LISTEN loop on a dedicated
// connection: the hub's wake-ups (commands for a link, operation changes
// for a watch) are notifications on a channel, hints that a poll or a
// sweep would also find.
package pglisten

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"
)

// Run LISTENs on channel over a dedicated connection to databaseURL
// (reconnecting after a second when it drops) and calls handle with each
// notification's payload until ctx ends; logErr receives the listener's
// errors. It returns nil when ctx ends, otherwise the listener's error.
func Run(ctx context.Context, databaseURL, channel string, handle func(payload string), logErr func(error)) error {
	l := &pgxlisten.Listener{
		Connect:        func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, databaseURL) },
		LogError:       func(_ context.Context, err error) { logErr(err) },
		ReconnectDelay: time.Second,
	}
	l.Handle(channel, pgxlisten.HandlerFunc(func(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
		handle(n.Payload)
		return nil
	}))
	err := l.Listen(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

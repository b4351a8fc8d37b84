package pgprimary

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// Configure sets idle_in_transaction_session_timeout to
// IdleInTransactionTimeout in milliseconds, unless the connection string
// gives its own.
func TestConfigureIdleInTransactionTimeout(t *testing.T) {
	for _, c := range []struct{ conn, want string }{
		{"postgres://u@h/db", "10000"},
		{"host=a,b dbname=x", "10000"},
		{"postgres://u@h/db?idle_in_transaction_session_timeout=60000", "60000"},
		{"host=a idle_in_transaction_session_timeout=0", "0"},
	} {
		cfg, err := pgconn.ParseConfig(c.conn)
		if err != nil {
			t.Fatal(err)
		}
		Configure(cfg, c.conn)
		if got := cfg.RuntimeParams[idleParam]; got != c.want {
			t.Errorf("%s: %s = %q, want %q", c.conn, idleParam, got, c.want)
		}
	}
}

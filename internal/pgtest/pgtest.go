// Package pgtest gives each test its own throwaway PostgreSQL database on a
// real server, empty (NewDatabase) or migrated (MigratedDatabase). The server is taken from IRONLINK_TEST_DATABASE_URL, else
// DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres (the
// machine's trust-auth cluster). A server that does not answer fails the test:
// storage tests never skip.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for goose
	"github.com/pressly/goose/v3"

	"github.com/ironlink/ironlink/migrations"
)

// ServerURL returns the URL of the PostgreSQL server tests use.
func ServerURL() string {
	for _, k := range []string{"IRONLINK_TEST_DATABASE_URL", "DATABASE_URL"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// NewDatabase creates an empty database named ironlink_test_<random> on the
// test server, drops it when the test ends, and returns its URL.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := ServerURL()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		tb.Fatalf("pgtest: PostgreSQL at %s does not answer (start it, or set IRONLINK_TEST_DATABASE_URL): %v", redact(admin), err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "ironlink_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("pgtest: create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			tb.Logf("pgtest: drop %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Logf("pgtest: drop %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		tb.Fatalf("pgtest: parse %s: %v", redact(admin), err)
	}
	u.Path = "/" + name
	return u.String()
}

// MigratedDatabase is the tests' one way to a migrated database: a fresh
// database (NewDatabase) with every migration applied as a hub replica
// applies them (migrations.Up). It returns the database's URL.
// internal/storetest opens a store on it; hub/store's own tests, which
// cannot import storetest, use it directly.
func MigratedDatabase(tb testing.TB) string {
	tb.Helper()
	url := NewDatabase(tb)
	Migrate(tb, url)
	return url
}

// DatabaseAt returns the URL of a fresh database (NewDatabase) migrated
// only up to version (a goose version: the number a migration file starts
// with), for tests of what a later migration does to rows written the way
// older code wrote them; they migrate on with Migrate or store.Migrate.
func DatabaseAt(tb testing.TB, version int64) string {
	tb.Helper()
	url := NewDatabase(tb)
	db, err := sql.Open("pgx", url)
	if err != nil {
		tb.Fatalf("pgtest: open %s: %v", redact(url), err)
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		tb.Fatalf("pgtest: load migrations: %v", err)
	}
	if _, err := p.UpTo(context.Background(), version); err != nil {
		tb.Fatalf("pgtest: migrate up to %d: %v", version, err)
	}
	return url
}

// Migrate applies the pending migrations to the database at url
// (migrations.Up; a no-op when it is up to date), failing the test on
// error: for a database made without them on purpose.
func Migrate(tb testing.TB, url string) {
	tb.Helper()
	if _, err := migrations.Up(context.Background(), url); err != nil {
		tb.Fatalf("pgtest: migrate: %v", err)
	}
}

func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// MustExec runs sql on the database at dbURL and fails the test on error.
func MustExec(tb testing.TB, dbURL, sql string, args ...any) {
	tb.Helper()
	withConn(tb, dbURL, func(ctx context.Context, c *pgx.Conn) {
		tb.Helper()
		if _, err := c.Exec(ctx, sql, args...); err != nil {
			tb.Fatalf("pgtest: %s: %v", sql, err)
		}
	})
}

// Count returns the result of a single-integer query.
func Count(tb testing.TB, dbURL, sql string, args ...any) int {
	tb.Helper()
	return queryRow[int](tb, dbURL, sql, args...)
}

// QueryString returns the result of a single-text query ("" for NULL).
func QueryString(tb testing.TB, dbURL, sql string, args ...any) string {
	tb.Helper()
	if s := queryRow[*string](tb, dbURL, sql, args...); s != nil {
		return *s
	}
	return ""
}

// queryRow returns the single value of a single-row query, scanned into a T.
func queryRow[T any](tb testing.TB, dbURL, sql string, args ...any) T {
	tb.Helper()
	var v T
	withConn(tb, dbURL, func(ctx context.Context, c *pgx.Conn) {
		tb.Helper()
		if err := c.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
			tb.Fatalf("pgtest: %s: %v", sql, err)
		}
	})
	return v
}

// withConn connects to the database at dbURL, calls fn and closes the
// connection; a failed connect fails the test.
func withConn(tb testing.TB, dbURL string, fn func(ctx context.Context, c *pgx.Conn)) {
	tb.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		tb.Fatalf("pgtest: connect: %v", err)
	}
	defer c.Close(ctx)
	fn(ctx, c)
}

// Checksums returns an MD5 checksum of the rows of every table in the
// public schema (rows as text, sorted), keyed by table name, except the
// tables named in skip. Two calls around an action show which tables it
// changed (see ChangedTables).
func Checksums(tb testing.TB, dbURL string, skip ...string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	withConn(tb, dbURL, func(ctx context.Context, c *pgx.Conn) {
		tb.Helper()
		rows, err := c.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`)
		if err != nil {
			tb.Fatalf("pgtest: list tables: %v", err)
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			tb.Fatalf("pgtest: list tables: %v", err)
		}
		for _, t := range tables {
			if slices.Contains(skip, t) {
				continue
			}
			var sum string
			q := fmt.Sprintf(`SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM %s t`, pgx.Identifier{t}.Sanitize())
			if err := c.QueryRow(ctx, q).Scan(&sum); err != nil {
				tb.Fatalf("pgtest: checksum %s: %v", t, err)
			}
			out[t] = sum
		}
	})
	return out
}

// ChangedTables returns the tables whose checksums differ between before
// and after (see Checksums), sorted.
func ChangedTables(before, after map[string]string) []string {
	var out []string
	for t, sum := range after {
		if before[t] != sum {
			out = append(out, t)
		}
	}
	for t := range before {
		if _, ok := after[t]; !ok {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

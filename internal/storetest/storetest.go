// Package storetest is the tests' one way to a hub store: a migrated
// database (pgtest.MigratedDatabase, the one way to that) with a store open
// on it that is closed when the test ends. (It is apart from pgtest because
// it imports hub/store, whose own tests use pgtest.) It is only imported by
// tests.
package storetest

import (
	"context"
	"log/slog"
	"testing"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// New migrates a fresh database and opens a store on it. log nil: the
// test's logger (internal/testlog). It returns the store and the
// database's URL.
func New(tb testing.TB, log *slog.Logger, opts ...store.Option) (*store.Store, string) {
	tb.Helper()
	url := pgtest.MigratedDatabase(tb)
	return Open(tb, url, log, opts...), url
}

// Open opens a store on url (migrated already, as a hub replica finds it),
// closed when the test ends. log nil: the test's logger.
func Open(tb testing.TB, url string, log *slog.Logger, opts ...store.Option) *store.Store {
	tb.Helper()
	if log == nil {
		log = testlog.New(tb)
	}
	st, err := store.Open(context.Background(), url, log, opts...)
	if err != nil {
		tb.Fatalf("storetest: open: %v", err)
	}
	tb.Cleanup(st.Close)
	return st
}

// Package testlog is the one logger tests hand to the code under test: what
// that code logs is kept (the last lines) and written to the test's log
// only when the test fails, so a passing run stays quiet and a failing one
// shows what the hub or satellite said. It is only imported by tests.
package testlog

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// keep is how many of the last lines are kept for a failing test.
const keep = 400

// New returns a logger (level Debug) whose lines are written to tb's log
// when tb has failed by the time it ends, and dropped otherwise.
func New(tb testing.TB) *slog.Logger {
	return NewLevel(tb, slog.LevelDebug)
}

// NewLevel is New at level.
func NewLevel(tb testing.TB, level slog.Leveler) *slog.Logger {
	tb.Helper()
	r := &ring{}
	tb.Cleanup(func() {
		if tb.Failed() {
			if lines := r.lines(); lines != "" {
				tb.Logf("log of the code under test (last %d lines at most):\n%s", keep, lines)
			}
		}
	})
	return slog.New(slog.NewTextHandler(r, &slog.HandlerOptions{Level: level}))
}

// Discard returns a logger that drops everything, for the few places that
// have no test at hand (package-level values, fuzz targets' hot paths).
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// ring keeps the last keep lines written to it.
type ring struct {
	mu   sync.Mutex
	buf  []string
	next int
	full bool
}

func (r *ring) Write(p []byte) (int, error) {
	line := string(bytes.TrimRight(p, "\n"))
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) < keep {
		r.buf = append(r.buf, line)
		return len(p), nil
	}
	r.buf[r.next] = line
	r.next = (r.next + 1) % keep
	r.full = true
	return len(p), nil
}

func (r *ring) lines() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return strings.Join(r.buf, "\n")
	}
	return strings.Join(append(append([]string{}, r.buf[r.next:]...), r.buf[:r.next]...), "\n")
}

package filewatch

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// waitFor polls cond every 10 ms for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHeldReloadsOnWrite runs a Held file's watch and rewrites the file in
// place: the new value takes effect (Applied called with old and new), a
// refused rewrite keeps the last good value with LastError set, and a
// later good rewrite takes effect again; a rename over the file (a
// ConfigMap's swap) does too.
func TestHeldReloadsOnWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	var applied atomic.Int32
	started := make(chan struct{})
	h, err := Load(HeldOptions[string]{
		Path: path, What: "test file", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Parse: func(b []byte) (*string, error) {
			s := string(b)
			if strings.HasPrefix(s, "bad") {
				return nil, errors.New("refused: bad")
			}
			return &s, nil
		},
		Interval: time.Hour, // fsnotify alone, not the periodic check
		Started:  func() { close(started) },
		Applied:  func(old, new *string) { applied.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	<-started
	current := func(want string) func() bool { return func() bool { return *h.Current() == want } }

	if err := os.WriteFile(path, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the rewritten file in force", current("two"))
	if n := applied.Load(); n != 1 {
		t.Errorf("Applied called %d times after one rewrite, want 1", n)
	}

	if err := os.WriteFile(path, []byte("bad three"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "LastError set for the refused file", func() bool { return h.LastError() != nil })
	if got := *h.Current(); got != "two" {
		t.Errorf("after a refused rewrite: %q in force, want the last good \"two\"", got)
	}

	tmp := filepath.Join(dir, "f.txt.new")
	if err := os.WriteFile(tmp, []byte("four"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the renamed-over file in force", current("four"))
	if err := h.LastError(); err != nil {
		t.Errorf("LastError %v after a good file, want nil", err)
	}
}

// TestHeldPeriodicCheck: a change made before the watch began (no
// fsnotify event will tell of it) is found by Run's periodic stat check.
func TestHeldPeriodicCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.txt")
	if err := os.WriteFile(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := Load(HeldOptions[string]{
		Path: path, What: "test file", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Parse:    func(b []byte) (*string, error) { s := string(b); return &s, nil },
		Interval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("two!"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !h.changedOnDisk() {
		t.Fatal("changedOnDisk false after a rewrite")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = h.Run(ctx) }()
	waitFor(t, "the file changed before the watch began in force", func() bool { return *h.Current() == "two!" })
}

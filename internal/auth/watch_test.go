package auth

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/syncbuf"
	"github.com/ironlink/ironlink/internal/testlog"
)

type change struct{ old, new *Roster }

// startWatcher runs a watcher on path until the test ends and returns it
// with the channel its OnChange calls go to.
func startWatcher(t *testing.T, path string, every time.Duration) (*RosterWatcher, chan change, *syncbuf.Buffer) {
	t.Helper()
	changes := make(chan change, 10)
	logs := &syncbuf.Buffer{}
	w, err := NewRosterWatcher(path, slog.New(slog.NewTextHandler(logs, nil)), func(o, n *Roster) { changes <- change{o, n} }, WithCheckInterval(every))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-w.started:
	case <-time.After(5 * time.Second):
		t.Fatal("watcher did not start")
	}
	return w, changes, logs
}

// writeAtomic replaces path the way editors and config tools do.
func writeAtomic(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func waitChange(t *testing.T, ch chan change) change {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no roster reload within 10s")
	}
	return change{}
}

func noChange(t *testing.T, ch chan change, d time.Duration) {
	t.Helper()
	select {
	case c := <-ch:
		t.Fatalf("unexpected reload to %v clients", len(c.new.Clients()))
	case <-time.After(d):
	}
}

func TestRosterWatcherFileChangeKeepsLastGood(t *testing.T) {
	path := filepath.Join(t.TempDir(), "roster.yaml")
	writeAtomic(t, path, rosterYAML(t, siteA, opsConsole))
	w, changes, logs := startWatcher(t, path, time.Hour) // file events only
	v := newVerifier(nil, time.Now())
	v.Roster = w.Roster
	tokB, _ := Sign(testKey(t, "b-rs", AlgRS256), "b-rs", siteB.id, testAudience, time.Minute, time.Now())
	if _, err := v.Verify(context.Background(), tokB); !isCheck(err, CheckUnknownClient) {
		t.Fatalf("site-b before it is added: %v", err)
	}

	writeAtomic(t, path, rosterYAML(t, siteA, siteB, opsConsole))
	c := waitChange(t, changes)
	if c.old.Client(siteB.id) != nil || c.new.Client(siteB.id) == nil || w.Roster() != c.new {
		t.Fatal("reload did not add site-b")
	}
	if _, err := v.Verify(context.Background(), tokB); err != nil {
		t.Fatalf("site-b after it is added: %v", err)
	}

	// An invalid file is refused and logged; the last good roster stays.
	good := w.Roster()
	writeAtomic(t, path, []byte("satellites:\n  - clientId: ironlink-agent-site-b\n    scopes: [device:update]\n"))
	deadline := time.Now().Add(10 * time.Second)
	for w.LastError() == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := w.LastError(); err == nil || !strings.Contains(err.Error(), "site is required") {
		t.Fatalf("LastError = %v", err)
	}
	noChange(t, changes, 300*time.Millisecond)
	if w.Roster() != good {
		t.Fatal("an invalid file replaced the roster")
	}
	if !strings.Contains(logs.String(), "keeping the last good roster") {
		t.Fatalf("refusal not logged: %s", logs.String())
	}
	tokA, _ := Sign(testKey(t, "a-es", AlgES256), "a-es", siteA.id, testAudience, time.Minute, time.Now())
	if _, err := v.Verify(context.Background(), tokA); err != nil {
		t.Fatalf("last good roster not in force: %v", err)
	}

	// The file is fixed: site-a is removed.
	writeAtomic(t, path, rosterYAML(t, siteB, opsConsole))
	c = waitChange(t, changes)
	if got := Removed(c.old, c.new); len(got) != 1 || got[0] != siteA.id {
		t.Fatalf("Removed = %v", got)
	}
	if w.LastError() != nil {
		t.Fatalf("LastError after a good file = %v", w.LastError())
	}
	tokA, _ = Sign(testKey(t, "a-es", AlgES256), "a-es", siteA.id, testAudience, time.Minute, time.Now())
	if _, err := v.Verify(context.Background(), tokA); !isCheck(err, CheckUnknownClient) {
		t.Fatalf("removed client: %v", err)
	}

	// Rewriting the same content is not a change.
	writeAtomic(t, path, rosterYAML(t, siteB, opsConsole))
	noChange(t, changes, 500*time.Millisecond)
}

func isCheck(err error, check string) bool {
	ve, ok := err.(*VerifyError)
	return ok && ve.Check == check
}

// A Kubernetes ConfigMap volume: roster.yaml -> ..data/roster.yaml,
// ..data -> ..<timestamp>; an update swaps the ..data symlink.
func TestRosterWatcherConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	gen := func(name string, data []byte) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "roster.yaml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gen("..2026_11_03_10_00_00.1", rosterYAML(t, siteA))
	must(t, os.Symlink("..2026_11_03_10_00_00.1", filepath.Join(dir, "..data")))
	must(t, os.Symlink("..data/roster.yaml", filepath.Join(dir, "roster.yaml")))
	w, changes, _ := startWatcher(t, filepath.Join(dir, "roster.yaml"), time.Hour)
	if w.Roster().Client(siteA.id) == nil {
		t.Fatal("initial roster")
	}
	gen("..2026_11_03_10_05_00.2", rosterYAML(t, siteA, opsReader))
	must(t, os.Symlink("..2026_11_03_10_05_00.2", filepath.Join(dir, "..data_tmp")))
	must(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	must(t, os.RemoveAll(filepath.Join(dir, "..2026_11_03_10_00_00.1")))
	c := waitChange(t, changes)
	if c.new.Client(opsReader.id) == nil {
		t.Fatal("ConfigMap update not seen")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// outOfSight puts the roster in a directory the watcher does not watch
// (it watches the directory of the symlink), so only SIGHUP or the periodic
// check can notice a change.
func outOfSight(t *testing.T, data []byte) (link, target string) {
	t.Helper()
	target = filepath.Join(t.TempDir(), "real.yaml")
	must(t, os.WriteFile(target, data, 0o644))
	link = filepath.Join(t.TempDir(), "roster.yaml")
	must(t, os.Symlink(target, link))
	return link, target
}

func TestRosterWatcherSIGHUP(t *testing.T) {
	link, target := outOfSight(t, rosterYAML(t, siteA))
	w, changes, _ := startWatcher(t, link, time.Hour)
	must(t, os.WriteFile(target, rosterYAML(t, siteA, siteB), 0o644))
	noChange(t, changes, 300*time.Millisecond) // nothing watches it
	must(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	c := waitChange(t, changes)
	if c.new.Client(siteB.id) == nil || w.Roster() != c.new {
		t.Fatal("SIGHUP did not reload")
	}
}

func TestRosterWatcherPeriodicCheck(t *testing.T) {
	link, target := outOfSight(t, rosterYAML(t, siteA))
	_, changes, _ := startWatcher(t, link, 50*time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	must(t, os.WriteFile(target, rosterYAML(t, siteA, opsConsole), 0o644))
	if c := waitChange(t, changes); c.new.Client(opsConsole.id) == nil {
		t.Fatal("periodic check did not reload")
	}
}

func TestNewRosterWatcherRefusesBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "roster.yaml")
	must(t, os.WriteFile(path, []byte("operators:\n  - clientId: x\n    scopes: [root]\n"), 0o644))
	if _, err := NewRosterWatcher(path, testlog.New(t), nil); err == nil || !strings.Contains(err.Error(), `unknown scope "root"`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := NewRosterWatcher(filepath.Join(t.TempDir(), "none.yaml"), nil, nil); err == nil {
		t.Fatal("missing file accepted")
	}
}

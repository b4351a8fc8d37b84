package policy

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironlink/ironlink/internal/boundedread"
	"github.com/ironlink/ironlink/internal/filewatch"
)

// DefaultCheckInterval is how often Watcher stats the policy file when no
// file event came (the backstop for file systems without inotify).
const DefaultCheckInterval = 5 * time.Second

const debounce = 100 * time.Millisecond

// Watcher holds the policy file in force and reloads it, as the roster
// watcher does (internal/auth.RosterWatcher): on SIGHUP, on any change in
// the file's directory (fsnotify; a Kubernetes ConfigMap update swaps a
// symlink) and on a periodic stat check. A file that fails to load is
// logged and ignored: the last good policy stays in force. Safe for
// concurrent use.
type Watcher struct {
	path     string
	log      *slog.Logger
	interval time.Duration
	onChange func(*File)

	cur     atomic.Pointer[File]
	mu      sync.Mutex
	goodSum [32]byte
	badSum  [32]byte
	stamp   stamp
	lastErr error
}

type stamp struct {
	target  string
	modTime time.Time
	size    int64
}

// NewWatcher loads the policy file at path (an error when it is invalid: a
// hub does not start with a broken policy) and returns a watcher holding
// it; interval ≤ 0 means DefaultCheckInterval. onChange (may be nil) is
// called after every reload that took effect. Call Run to watch.
func NewWatcher(path string, interval time.Duration, log *slog.Logger, onChange func(*File)) (*Watcher, error) {
	if interval <= 0 {
		interval = DefaultCheckInterval
	}
	w := &Watcher{path: path, log: log, interval: interval, onChange: onChange}
	data, st, err := w.read()
	if err != nil {
		return nil, err
	}
	f, err := Parse(data)
	if err != nil {
		return nil, err
	}
	w.cur.Store(f)
	w.goodSum, w.stamp = sha256.Sum256(data), st
	log.Info("policy loaded", "path", path, "default", f.Default.String(), "sites", f.SiteNames())
	return w, nil
}

// Static returns a Watcher-like source that always answers f (no file;
// for tests and hubs without --policy-file).
func Static(f *File) *Watcher {
	w := &Watcher{log: slog.Default()}
	w.cur.Store(f)
	return w
}

// Policy returns the policy file in force.
func (w *Watcher) Policy() *File { return w.cur.Load() }

// LastError returns why the newest version of the file was refused, or nil.
func (w *Watcher) LastError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

func (w *Watcher) statFile() (stamp, error) {
	target, err := filepath.EvalSymlinks(w.path)
	if err != nil {
		return stamp{}, err
	}
	fi, err := os.Stat(target)
	if err != nil {
		return stamp{}, err
	}
	return stamp{target: target, modTime: fi.ModTime(), size: fi.Size()}, nil
}

func (w *Watcher) read() ([]byte, stamp, error) {
	st, err := w.statFile()
	if err != nil {
		return nil, st, err
	}
	data, err := boundedread.File(w.path, boundedread.ConfigLimit)
	return data, st, err
}

// Reload reads the file now: changed is true when a new valid policy took
// effect; on error the previous policy stays in force (also logged and
// kept for LastError).
func (w *Watcher) Reload() (changed bool, err error) {
	if w.path == "" {
		return false, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	data, st, err := w.read()
	w.stamp = st
	if err != nil {
		w.failed(err, [32]byte{})
		return false, err
	}
	sum := sha256.Sum256(data)
	if sum == w.goodSum {
		w.lastErr = nil
		return false, nil
	}
	f, err := Parse(data)
	if err != nil {
		w.failed(err, sum)
		return false, err
	}
	w.cur.Store(f)
	w.goodSum, w.badSum, w.lastErr = sum, [32]byte{}, nil
	w.log.Info("policy reloaded", "path", w.path, "default", f.Default.String(), "sites", f.SiteNames())
	if w.onChange != nil {
		w.onChange(f)
	}
	return true, nil
}

func (w *Watcher) failed(err error, sum [32]byte) {
	w.lastErr = err
	if sum != ([32]byte{}) && sum == w.badSum {
		return
	}
	w.badSum = sum
	w.log.Error("policy not reloaded; keeping the last good policy", "path", w.path, "err", err)
}

func (w *Watcher) changedOnDisk() bool {
	st, err := w.statFile()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		return w.stamp != (stamp{})
	}
	return st != w.stamp
}

// Run watches until ctx ends (SIGHUP, fsnotify events in the file's
// directory debounced by 100 ms, the periodic stat check); it returns nil.
// A Static watcher returns when ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	if w.path == "" {
		<-ctx.Done()
		return nil
	}
	return filewatch.Run(ctx, filewatch.Options{
		Path: w.path, What: "policy", Interval: w.interval, Debounce: debounce, Log: w.log,
		Reload:        func() { _, _ = w.Reload() },
		ChangedOnDisk: w.changedOnDisk,
	})
}

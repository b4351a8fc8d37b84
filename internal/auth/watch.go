package auth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironlink/ironlink/internal/boundedread"
	"github.com/ironlink/ironlink/internal/filewatch"
)

// DefaultRosterCheckInterval is how often RosterWatcher compares the roster
// file's modification time, size and symlink target when no file event came
// (the backstop for file systems without inotify).
const DefaultRosterCheckInterval = 5 * time.Second

// rosterDebounce coalesces the burst of events a single update makes.
const rosterDebounce = 100 * time.Millisecond

// RosterWatcher holds the current roster of a file and reloads it on SIGHUP,
// on any change in the file's directory (fsnotify; watching the directory
// rather than the file catches Kubernetes ConfigMap updates, which swap a
// "..data" symlink), and on a periodic stat check as a backstop. A new file
// that fails to load is logged and ignored: the last good roster stays in
// force. Safe for concurrent use.
type RosterWatcher struct {
	path     string
	log      *slog.Logger
	onChange func(old, new *Roster)
	interval time.Duration

	cur     atomic.Pointer[Roster]
	mu      sync.Mutex // serializes reloads and OnChange calls
	goodSum [32]byte
	badSum  [32]byte
	stamp   fileStamp
	lastErr error
	started chan struct{} // closed once Run watches (tests)
	once    sync.Once
}

type fileStamp struct {
	target  string
	modTime time.Time
	size    int64
}

// RosterWatcherOption configures a RosterWatcher.
type RosterWatcherOption func(*RosterWatcher)

// WithCheckInterval sets the backstop stat interval (default DefaultRosterCheckInterval).
func WithCheckInterval(d time.Duration) RosterWatcherOption {
	return func(w *RosterWatcher) {
		if d > 0 {
			w.interval = d
		}
	}
}

// NewRosterWatcher loads the roster at path — an error if it is invalid, so
// a hub never starts without a good roster — and returns a watcher holding
// it. onChange (may be nil) is called after every reload that changed the
// roster, with the previous and the new roster, one call at a time; the hub
// uses it to close links of clients that lost access (see Removed and
// Roster.StillAuthorized). Call Run to start watching.
func NewRosterWatcher(path string, log *slog.Logger, onChange func(old, new *Roster), opts ...RosterWatcherOption) (*RosterWatcher, error) {
	if log == nil {
		log = slog.Default()
	}
	w := &RosterWatcher{path: path, log: log, onChange: onChange, interval: DefaultRosterCheckInterval, started: make(chan struct{})}
	for _, o := range opts {
		o(w)
	}
	data, stamp, err := w.read()
	if err != nil {
		return nil, err
	}
	r, err := ParseRoster(data)
	if err != nil {
		return nil, fmt.Errorf("roster %s: %w", path, err)
	}
	w.cur.Store(r)
	w.goodSum, w.stamp = sha256.Sum256(data), stamp
	log.Info("roster loaded", "path", path, "clients", len(r.ids))
	return w, nil
}

// Roster returns the roster in force; use it as Verifier.Roster.
func (w *RosterWatcher) Roster() *Roster { return w.cur.Load() }

// LastError returns why the newest version of the file was refused, or nil
// when the roster in force is the file's current content.
func (w *RosterWatcher) LastError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

func (w *RosterWatcher) read() ([]byte, fileStamp, error) {
	st, err := w.statFile()
	if err != nil {
		return nil, st, fmt.Errorf("read roster: %w", err)
	}
	data, err := boundedread.File(w.path, boundedread.ConfigLimit)
	if err != nil {
		return nil, st, fmt.Errorf("read roster: %w", err)
	}
	return data, st, nil
}

func (w *RosterWatcher) statFile() (fileStamp, error) {
	target, err := filepath.EvalSymlinks(w.path)
	if err != nil {
		return fileStamp{}, err
	}
	fi, err := os.Stat(target)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{target: target, modTime: fi.ModTime(), size: fi.Size()}, nil
}

// Reload reads the file now. It returns changed = true when a new, valid
// roster took effect (OnChange has then been called), and an error when the
// file cannot be read or is invalid — the previous roster stays in force and
// the error is also logged and kept for LastError.
func (w *RosterWatcher) Reload() (changed bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	data, stamp, err := w.read()
	w.stamp = stamp
	if err != nil {
		w.failed(err, [32]byte{})
		return false, err
	}
	sum := sha256.Sum256(data)
	if sum == w.goodSum {
		w.lastErr = nil
		return false, nil
	}
	r, err := ParseRoster(data)
	if err != nil {
		err = fmt.Errorf("roster %s: %w", w.path, err)
		w.failed(err, sum)
		return false, err
	}
	old := w.cur.Swap(r)
	w.goodSum, w.badSum, w.lastErr = sum, [32]byte{}, nil
	removed := Removed(old, r)
	w.log.Info("roster reloaded", "path", w.path, "clients", len(r.ids), "lost_access", removed)
	if w.onChange != nil {
		w.onChange(old, r)
	}
	return true, nil
}

// failed records a refused file; the same bad content is logged once.
func (w *RosterWatcher) failed(err error, sum [32]byte) {
	w.lastErr = err
	if sum != ([32]byte{}) && sum == w.badSum {
		return
	}
	w.badSum = sum
	w.log.Error("roster not reloaded; keeping the last good roster", "path", w.path, "err", err)
}

// changedOnDisk reports whether the file's stamp differs from the last read.
func (w *RosterWatcher) changedOnDisk() bool {
	st, err := w.statFile()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		return w.stamp != (fileStamp{})
	}
	return st != w.stamp
}

// Run watches until ctx ends: SIGHUP, fsnotify events in the file's
// directory (debounced by 100 ms) and the periodic stat check each trigger a
// Reload. When fsnotify is unavailable it logs a warning and relies on the
// periodic check. It returns nil when ctx ends.
func (w *RosterWatcher) Run(ctx context.Context) error {
	return filewatch.Run(ctx, filewatch.Options{
		Path: w.path, What: "roster", Interval: w.interval, Debounce: rosterDebounce, Log: w.log,
		Reload:        func() { _, _ = w.Reload() },
		ChangedOnDisk: w.changedOnDisk,
		Started:       func() { w.once.Do(func() { close(w.started) }) },
	})
}

package auth

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

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
	held     *filewatch.Held[Roster]
	interval time.Duration
	started  chan struct{} // closed once Run watches (tests)
	once     sync.Once
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
	w := &RosterWatcher{interval: DefaultRosterCheckInterval, started: make(chan struct{})}
	for _, o := range opts {
		o(w)
	}
	held, err := filewatch.Load(filewatch.HeldOptions[Roster]{
		Path: path, What: "roster", Log: log,
		Parse: func(data []byte) (*Roster, error) {
			r, err := ParseRoster(data)
			if err != nil {
				return nil, fmt.Errorf("roster %s: %w", path, err)
			}
			return r, nil
		},
		ReadErr: func(err error) error { return fmt.Errorf("read roster: %w", err) },
		Applied: func(old, r *Roster) {
			log.Info("roster reloaded", "path", path, "clients", len(r.ids), "lost_access", Removed(old, r))
			if onChange != nil {
				onChange(old, r)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	w.held = held
	log.Info("roster loaded", "path", path, "clients", len(held.Current().ids))
	return w, nil
}

// Roster returns the roster in force; use it as Verifier.Roster.
func (w *RosterWatcher) Roster() *Roster { return w.held.Current() }

// LastError returns why the newest version of the file was refused, or nil
// when the roster in force is the file's current content.
func (w *RosterWatcher) LastError() error { return w.held.LastError() }

// Reload reads the file now. It returns changed = true when a new, valid
// roster took effect (OnChange has then been called), and an error when the
// file cannot be read or is invalid — the previous roster stays in force and
// the error is also logged and kept for LastError.
func (w *RosterWatcher) Reload() (changed bool, err error) { return w.held.Reload() }

// Run watches until ctx ends: SIGHUP, fsnotify events in the file's
// directory (debounced by 100 ms) and the periodic stat check each trigger a
// Reload. When fsnotify is unavailable it logs a warning and relies on the
// periodic check. It returns nil when ctx ends.
func (w *RosterWatcher) Run(ctx context.Context) error {
	return w.held.Run(ctx, w.interval, rosterDebounce, func() { w.once.Do(func() { close(w.started) }) })
}

package auth

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ironlink/ironlink/internal/filewatch"
)

// DefaultRosterCheckInterval is how often RosterWatcher compares the roster
// file's modification time, size and symlink target when no file event came
// (the backstop for file systems without inotify).
const DefaultRosterCheckInterval = filewatch.DefaultInterval

// RosterWatcher holds the current roster of a file and reloads it through
// filewatch.Held: on SIGHUP, on any change in the file's directory
// (fsnotify; watching the directory rather than the file catches Kubernetes
// ConfigMap updates, which swap a "..data" symlink), and on a periodic stat
// check as a backstop. A new file that fails to load is logged and ignored:
// the last good roster stays in force. Reload (changed = true when a new
// valid roster took effect, after onChange), LastError and Run(ctx) come
// from the Held. Safe for concurrent use.
type RosterWatcher struct {
	*filewatch.Held[Roster]
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
		Path: path, What: "roster", Log: log, Interval: w.interval,
		Started: func() { w.once.Do(func() { close(w.started) }) },
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
	w.Held = held
	log.Info("roster loaded", "path", path, "clients", len(held.Current().ids))
	return w, nil
}

// Roster returns the roster in force; use it as Verifier.Roster.
func (w *RosterWatcher) Roster() *Roster { return w.Current() }

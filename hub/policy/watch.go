package policy

import (
	"context"
	"log/slog"
	"time"

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
	held     *filewatch.Held[File]
	interval time.Duration
}

// NewWatcher loads the policy file at path (an error when it is invalid: a
// hub does not start with a broken policy) and returns a watcher holding
// it; interval ≤ 0 means DefaultCheckInterval. onChange (may be nil) is
// called after every reload that took effect. Call Run to watch.
func NewWatcher(path string, interval time.Duration, log *slog.Logger, onChange func(*File)) (*Watcher, error) {
	if interval <= 0 {
		interval = DefaultCheckInterval
	}
	held, err := filewatch.Load(filewatch.HeldOptions[File]{
		Path: path, What: "policy", Log: log, Parse: Parse,
		Applied: func(_, f *File) {
			log.Info("policy reloaded", "path", path, "default", f.Default.String(), "sites", f.SiteNames())
			if onChange != nil {
				onChange(f)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	f := held.Current()
	log.Info("policy loaded", "path", path, "default", f.Default.String(), "sites", f.SiteNames())
	return &Watcher{held: held, interval: interval}, nil
}

// Static returns a Watcher-like source that always answers f (no file;
// for tests and hubs without --policy-file).
func Static(f *File) *Watcher {
	return &Watcher{held: filewatch.Static(f, slog.Default())}
}

// Policy returns the policy file in force.
func (w *Watcher) Policy() *File { return w.held.Current() }

// LastError returns why the newest version of the file was refused, or nil.
func (w *Watcher) LastError() error { return w.held.LastError() }

// Reload reads the file now: changed is true when a new valid policy took
// effect; on error the previous policy stays in force (also logged and
// kept for LastError).
func (w *Watcher) Reload() (changed bool, err error) { return w.held.Reload() }

// Run watches until ctx ends (SIGHUP, fsnotify events in the file's
// directory debounced by 100 ms, the periodic stat check); it returns nil.
// A Static watcher returns when ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	return w.held.Run(ctx, w.interval, debounce, nil)
}

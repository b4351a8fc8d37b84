package policy

import (
	"log/slog"
	"time"

	"github.com/ironlink/ironlink/internal/filewatch"
)

// DefaultCheckInterval is how often Watcher stats the policy file when no
// file event came (the backstop for file systems without inotify).
const DefaultCheckInterval = filewatch.DefaultInterval

// Watcher holds the policy file in force and reloads it, as the roster
// watcher does (internal/auth.RosterWatcher), through filewatch.Held: on
// SIGHUP, on any change in the file's directory and on a periodic stat
// check; the last good policy stays in force. Its Reload, LastError and
// Run(ctx) come from the Held; a Static watcher's Reload does nothing and
// its Run returns when ctx ends. Safe for concurrent use.
type Watcher struct{ *filewatch.Held[File] }

// NewWatcher loads the policy file at path (an error when it is invalid: a
// hub does not start with a broken policy) and returns a watcher holding
// it; interval ≤ 0 means DefaultCheckInterval. onChange (may be nil) is
// called after every reload that took effect. Call Run to watch.
func NewWatcher(path string, interval time.Duration, log *slog.Logger, onChange func(*File)) (*Watcher, error) {
	held, err := filewatch.Load(filewatch.HeldOptions[File]{
		Path: path, What: "policy", Log: log, Parse: Parse, Interval: interval,
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
	return &Watcher{held}, nil
}

// Static returns a Watcher-like source that always answers f (no file;
// for tests and hubs without --policy-file).
func Static(f *File) *Watcher { return &Watcher{filewatch.Static(f, slog.Default())} }

// Policy returns the policy file in force.
func (w *Watcher) Policy() *File { return w.Current() }

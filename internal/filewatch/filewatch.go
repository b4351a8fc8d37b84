// Package filewatch runs the reload loop shared by the hub's watched
// configuration files (the roster in internal/auth, the quarantine policy in
// hub/policy): a file is reloaded on SIGHUP, on fsnotify events in its
// directory (debounced, so a ConfigMap's symlink swap or an editor's
// write-and-rename gives one reload) and when a periodic stat check sees it
// changed (the backstop where fsnotify is unavailable or misses a change).
// Held keeps the last good value of such a file (Parse decides what is
// valid; a refused file leaves the last good value in force) and runs
// that loop for it; Run alone leaves what a reload does to the caller.
package filewatch

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Options configure Run.
type Options struct {
	// Path of the watched file; its directory is watched with fsnotify.
	Path string
	// What names the file in log messages, for example "roster".
	What string
	// Interval between periodic stat checks (must be > 0).
	Interval time.Duration
	// Debounce is how long events must be quiet before a reload (for
	// example 100 ms).
	Debounce time.Duration
	// Log receives the SIGHUP and fsnotify messages.
	Log *slog.Logger
	// Reload re-reads the file; its own errors are its to log and keep.
	Reload func()
	// ChangedOnDisk reports whether the file differs from what was last
	// loaded (size, modification time, inode); called every Interval.
	ChangedOnDisk func() bool
	// Started, when set, is called once the watch is set up (events are
	// seen from then on).
	Started func()
}

// Run watches o.Path until ctx ends and returns nil then. When fsnotify
// is unavailable it logs a warning and relies on the periodic check.
func Run(ctx context.Context, o Options) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	var events chan fsnotify.Event
	var errs chan error
	fw, err := fsnotify.NewWatcher()
	if err == nil {
		if err = fw.Add(filepath.Dir(o.Path)); err != nil {
			fw.Close()
		}
	}
	if err != nil {
		o.Log.Warn(o.What+" file events unavailable; relying on the periodic check", "path", o.Path, "every", o.Interval, "err", err)
	} else {
		defer fw.Close()
		events, errs = fw.Events, fw.Errors
	}
	if o.Started != nil {
		o.Started()
	}

	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			o.Log.Info("SIGHUP: reloading "+o.What, "path", o.Path)
			o.Reload()
		case _, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			debounce.Reset(o.Debounce)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			o.Log.Warn(o.What+" file watch", "path", o.Path, "err", err)
		case <-debounce.C:
			o.Reload()
		case <-tick.C:
			if o.ChangedOnDisk() {
				o.Reload()
			}
		}
	}
}

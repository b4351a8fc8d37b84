package filewatch

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
)

// DefaultInterval is the usual backstop between periodic stat checks.
const DefaultInterval = 5 * time.Second

// Debounce is how long a Held file's events must be quiet before a reload:
// it coalesces the burst of events a single update makes.
const Debounce = 100 * time.Millisecond

// HeldOptions configure a Held file.
type HeldOptions[T any] struct {
	// Path of the file; empty makes a static holder (see Static).
	Path string
	// What names the file in log messages, for example "roster".
	What string
	// Log receives the reload messages.
	Log *slog.Logger
	// Parse turns the file's bytes into a value; an error refuses the
	// file (the last good value stays in force). The error is returned
	// as is: wrap it in Parse to name the file.
	Parse func([]byte) (*T, error)
	// ReadErr, when set, wraps an error reading the file (stat or read).
	ReadErr func(error) error
	// Interval between periodic stat checks; ≤ 0 means DefaultInterval.
	Interval time.Duration
	// Started, when set, is called once Run has set up the watch.
	Started func()
	// Applied is called, under the reload lock, after a new valid value
	// took effect on Reload (not on the first load), with the previous and
	// the new value: it logs and notifies.
	Applied func(old, new *T)
}

// Held holds the last good value of a watched file and reloads it: the
// same bytes are not parsed again, a refused file is logged once per
// content and kept for LastError, the last good value stays in force.
// Safe for concurrent use.
type Held[T any] struct {
	o HeldOptions[T]

	cur     atomic.Pointer[T]
	mu      sync.Mutex // serializes reloads and Applied calls
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

// Load reads and parses the file — an error when it cannot be read or is
// invalid — and returns a holder with it in force.
func Load[T any](o HeldOptions[T]) (*Held[T], error) {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	h := &Held[T]{o: o}
	data, st, err := h.read()
	if err != nil {
		return nil, err
	}
	v, err := o.Parse(data)
	if err != nil {
		return nil, err
	}
	h.cur.Store(v)
	h.goodSum, h.stamp = sha256.Sum256(data), st
	return h, nil
}

// Static returns a holder of v with no file: Reload does nothing.
func Static[T any](v *T, log *slog.Logger) *Held[T] {
	h := &Held[T]{o: HeldOptions[T]{Log: log}}
	h.cur.Store(v)
	return h
}

// Current returns the value in force.
func (h *Held[T]) Current() *T { return h.cur.Load() }

// LastError returns why the newest version of the file was refused, or nil
// when the value in force is the file's current content.
func (h *Held[T]) LastError() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastErr
}

func (h *Held[T]) statFile() (stamp, error) {
	target, err := filepath.EvalSymlinks(h.o.Path)
	if err != nil {
		return stamp{}, err
	}
	fi, err := os.Stat(target)
	if err != nil {
		return stamp{}, err
	}
	return stamp{target: target, modTime: fi.ModTime(), size: fi.Size()}, nil
}

func (h *Held[T]) read() ([]byte, stamp, error) {
	st, err := h.statFile()
	if err == nil {
		var data []byte
		if data, err = boundedread.File(h.o.Path, boundedread.ConfigLimit); err == nil {
			return data, st, nil
		}
	}
	if h.o.ReadErr != nil {
		err = h.o.ReadErr(err)
	}
	return nil, st, err
}

// Reload reads the file now: changed is true when a new valid value took
// effect (Applied has then been called); on error the previous value stays
// in force (the error is also logged and kept for LastError). A static
// holder returns false, nil.
func (h *Held[T]) Reload() (changed bool, err error) {
	if h.o.Path == "" {
		return false, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	data, st, err := h.read()
	h.stamp = st
	if err != nil {
		h.failed(err, [32]byte{})
		return false, err
	}
	sum := sha256.Sum256(data)
	if sum == h.goodSum {
		h.lastErr = nil
		return false, nil
	}
	v, err := h.o.Parse(data)
	if err != nil {
		h.failed(err, sum)
		return false, err
	}
	old := h.cur.Swap(v)
	h.goodSum, h.badSum, h.lastErr = sum, [32]byte{}, nil
	if h.o.Applied != nil {
		h.o.Applied(old, v)
	}
	return true, nil
}

// failed records a refused file; the same bad content is logged once.
func (h *Held[T]) failed(err error, sum [32]byte) {
	h.lastErr = err
	if sum != ([32]byte{}) && sum == h.badSum {
		return
	}
	h.badSum = sum
	h.o.Log.Error(h.o.What+" not reloaded; keeping the last good "+h.o.What, "path", h.o.Path, "err", err)
}

// changedOnDisk reports whether the file's stamp differs from the last read.
func (h *Held[T]) changedOnDisk() bool {
	st, err := h.statFile()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		return h.stamp != (stamp{})
	}
	return st != h.stamp
}

// Run watches the file until ctx ends (see the package Run; events are
// debounced by Debounce) and returns nil. A static holder waits for ctx to
// end.
func (h *Held[T]) Run(ctx context.Context) error {
	if h.o.Path == "" {
		<-ctx.Done()
		return nil
	}
	return Run(ctx, Options{
		Path: h.o.Path, What: h.o.What, Interval: h.o.Interval, Debounce: Debounce, Log: h.o.Log,
		Reload:        func() { _, _ = h.Reload() },
		ChangedOnDisk: h.changedOnDisk,
		Started:       h.o.Started,
	})
}

// ReadConfig reads the configuration file at path (at most
// boundedread.ConfigLimit bytes) and parses it once, without watching: a
// read error reads "read <name>: …", a parse error "<name> <path>: …".
func ReadConfig[T any](path, name string, parse func([]byte) (*T, error)) (*T, error) {
	data, err := boundedread.File(path, boundedread.ConfigLimit)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	v, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", name, path, err)
	}
	return v, nil
}

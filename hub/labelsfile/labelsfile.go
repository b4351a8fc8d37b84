// Package labelsfile is the hub's labels file (--labels-file;
// docs/reference/labels.md): failure-domain labels an operator gives
// devices by id or by site and name pattern, over the labels the
// satellites map from Ironic. The hub reloads it (internal/filewatch) and
// writes the entries in force to PostgreSQL (store.ReplaceFileLabels), where
// every listing and selector reads them.
package labelsfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"go.yaml.in/yaml/v3"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/filewatch"
	"github.com/ironlink/ironlink/internal/labels"
	"github.com/ironlink/ironlink/internal/logkey"
	"github.com/ironlink/ironlink/internal/periodic"
	"github.com/ironlink/ironlink/internal/sitename"
)

// MaxEntries is the most entries a labels file may hold.
const MaxEntries = 10000

// File is a parsed labels file: its entries in file order (a later entry
// wins per key).
type File struct {
	Entries []store.FileLabelEntry
}

type entryYAML struct {
	Site   string            `yaml:"site"`
	Name   string            `yaml:"name"`
	Device string            `yaml:"device"`
	Labels map[string]string `yaml:"labels"`
}

// Parse parses and checks a labels file:
//
//	labels:
//	  - site: site-a
//	    name: "gpu-r12-*"      # shell pattern of node names ("*", "?", backslash quotes)
//	    labels: {rack: r12, row: b, switch: s3}
//	  - device: 3f1c2a4e-...  # one node by UUID (no site or name then)
//	    labels: {power-feed: pdu-b}
//
// Other top-level keys are ignored (the chart's values file can carry it);
// a document without `labels` is an error. Every problem is reported
// (errors.Join), each naming its entry ("labels[3].labels: ...").
func Parse(data []byte) (*File, error) {
	var top map[string]yaml.Node
	if err := yaml.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("parse YAML: %w", err)
	}
	node, ok := top["labels"]
	if !ok {
		return nil, errors.New("no `labels` key")
	}
	raw, err := yaml.Marshal(&node)
	if err != nil {
		return nil, fmt.Errorf("re-encode labels: %w", err)
	}
	var ys []entryYAML
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&ys); err != nil {
		return nil, fmt.Errorf("labels: %w", err)
	}
	if len(ys) > MaxEntries {
		return nil, fmt.Errorf("labels: %d entries, at most %d", len(ys), MaxEntries)
	}
	f := &File{}
	var errs []error
	for i, y := range ys {
		e, err := convert(fmt.Sprintf("labels[%d]", i), y)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f.Entries = append(f.Entries, e)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return f, nil
}

func convert(where string, y entryYAML) (store.FileLabelEntry, error) {
	e := store.FileLabelEntry{Labels: y.Labels}
	if len(y.Labels) == 0 {
		return e, fmt.Errorf("%s: no labels", where)
	}
	if err := labels.Check(where+".labels", y.Labels); err != nil {
		return e, err
	}
	if y.Device != "" {
		if y.Site != "" || y.Name != "" {
			return e, fmt.Errorf("%s: give device, or site and name, not both", where)
		}
		u, err := uuid.Parse(y.Device)
		if err != nil {
			return e, fmt.Errorf("%s.device %q: not a node UUID", where, y.Device)
		}
		e.DeviceID = u.String()
		return e, nil
	}
	if err := sitename.Check(y.Site); err != nil {
		return e, fmt.Errorf("%s.site: %w", where, err)
	}
	if y.Name == "" {
		return e, fmt.Errorf("%s: give device, or site and name (a pattern: \"*\" for every device of the site)", where)
	}
	like, err := store.GlobToLike(y.Name)
	if err != nil {
		return e, fmt.Errorf("%s.name: %w", where, err)
	}
	e.Site, e.NameLike = y.Site, like
	return e, nil
}

// Load reads and parses the labels file at path. Errors start with the path.
func Load(path string) (*File, error) { return filewatch.ReadConfig(path, "labels file", Parse) }

// Store is what the keeper writes to (a *store.Store).
type Store interface {
	ReplaceFileLabels(ctx context.Context, entries []store.FileLabelEntry) error
	CountDevicesOverLabelLimit(ctx context.Context) (store.LabelsOverLimit, error)
}

// Keeper holds the labels file, reloads it and keeps PostgreSQL's copy
// equal to the file in force.
type Keeper struct {
	held *filewatch.Held[File]
	st   Store
	log  *slog.Logger
	// written is the file last written to the store; failing is true
	// after a failed write was logged (Run's goroutine only).
	written *File
	failing bool
	// capped receives the count of devices over the label limit
	// (SetCappedGauge; nil: none); lastCapped is the count last logged.
	capped     func(n int)
	lastCapped int
}

// SetCappedGauge makes the keeper report, after each write of the file
// and every CountInterval, how many devices carry more merged labels
// than the limit (so that some were dropped; docs/reference/labels.md) to
// set (the hub's ironlink_hub_devices_labels_capped). Call before Run.
func (k *Keeper) SetCappedGauge(set func(n int)) { k.capped = set }

// CountInterval is how often Run recounts the devices over the label
// limit (the satellites' labels change between reloads of the file).
const CountInterval = time.Minute

// New loads the labels file at path (an invalid file is an error: a hub
// does not start with a broken one) and returns its keeper over st.
func New(path string, st Store, log *slog.Logger) (*Keeper, error) {
	held, err := filewatch.Load(filewatch.HeldOptions[File]{Path: path, What: "labels", Log: log, Parse: Parse,
		Applied: func(_, f *File) { log.Info("labels file reloaded", "path", path, "entries", len(f.Entries)) }})
	if err != nil {
		return nil, err
	}
	log.Info("labels file loaded", "path", path, "entries", len(held.Current().Entries))
	return &Keeper{held: held, st: st, log: log}, nil
}

// RetryInterval is how often Run checks that the file in force is the one
// written (a reload, or a write that failed while PostgreSQL was away).
const RetryInterval = time.Second

// Run watches the file and writes each new version to the store (at once,
// then within RetryInterval of a reload; a failed write is tried again)
// until ctx ends.
func (k *Keeper) Run(ctx context.Context) error {
	go func() { _ = k.held.Run(ctx) }()
	last := time.Time{}
	periodic.NowAndEvery(ctx, RetryInterval, func() {
		if k.sync(ctx) || time.Since(last) >= CountInterval {
			if k.count(ctx) {
				last = time.Now()
			}
		}
	})
	return nil
}

// count counts the devices over the label limit, sets the gauge and logs
// a warning naming some of them when the count changed; false when the
// count failed (it is tried again at the next tick).
func (k *Keeper) count(ctx context.Context) bool {
	if k.written == nil {
		return false
	}
	n, err := k.st.CountDevicesOverLabelLimit(ctx)
	if err != nil {
		if ctx.Err() == nil {
			k.log.Warn("cannot count the devices over the label limit", logkey.Err, err)
		}
		return false
	}
	if k.capped != nil {
		k.capped(n.Devices)
	}
	if n.Devices != k.lastCapped && n.Devices > 0 {
		k.log.Warn("devices carry more labels than the limit with the labels file's merged in: the file's labels are kept first, then the satellite's in key order, the rest dropped",
			"devices", n.Devices, "limit", labels.MaxPerDevice, "some", n.Sample)
	}
	k.lastCapped = n.Devices
	return true
}

// sync writes the file in force when it is not the one last written;
// true when it wrote it now.
func (k *Keeper) sync(ctx context.Context) bool {
	f := k.held.Current()
	if f == k.written {
		return false
	}
	if err := k.st.ReplaceFileLabels(ctx, f.Entries); err != nil {
		if ctx.Err() == nil && !k.failing {
			k.log.Warn("labels file not written to the database; trying again every second", logkey.Err, err)
			k.failing = true
		}
		return false
	}
	if k.failing {
		k.log.Info("labels file written to the database")
	}
	k.written, k.failing = f, false
	return true
}

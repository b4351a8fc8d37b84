package labelsfile

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/store"
)

// fakeStore records writes and answers a fixed count of devices over the
// label limit.
type fakeStore struct {
	mu     sync.Mutex
	writes int
	over   store.LabelsOverLimit
}

func (f *fakeStore) ReplaceFileLabels(context.Context, []store.FileLabelEntry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	return nil
}

func (f *fakeStore) CountDevicesOverLabelLimit(context.Context) (store.LabelsOverLimit, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.over, nil
}

// syncBuf is a bytes.Buffer safe for the logger's goroutine.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestKeeperReportsDevicesOverTheLabelLimit: once the file is written the
// keeper counts the devices whose merged labels exceed the limit, sets
// the gauge and logs a warning naming them.
func TestKeeperReportsDevicesOverTheLabelLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "labels.yaml")
	if err := os.WriteFile(path, []byte("labels:\n  - {site: site-a, name: \"*\", labels: {rack: r1}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st := &fakeStore{over: store.LabelsOverLimit{Devices: 2, Sample: []string{"site-a/big (x): 34 labels"}}}
	var logs syncBuf
	k, err := New(path, st, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 10)
	k.SetCappedGauge(func(n int) { got <- n })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = k.Run(ctx) }()
	select {
	case n := <-got:
		if n != 2 {
			t.Fatalf("gauge set to %d, want 2", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the keeper never reported the devices over the label limit")
	}
	cancel()
	if out := logs.String(); !strings.Contains(out, "more labels than the limit") || !strings.Contains(out, "site-a/big (x): 34 labels") {
		t.Errorf("no warning naming the device over the limit in the log:\n%s", out)
	}
}

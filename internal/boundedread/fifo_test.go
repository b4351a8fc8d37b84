//go:build unix

package boundedread_test

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/boundedread"
)

// TestFileRefusesANamedPipe: a path pointing at a named pipe (no writer) is
// refused at once; it blocked in open(2) for ever, so a hub given one as
// --roster, --policy-file or --enrol-key-file hung at start (and its
// roster or policy watcher at a reload) without a word.
func TestFileRefusesANamedPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := boundedread.File(fifo, 1<<20)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, boundedread.ErrNotRegular) || !strings.Contains(err.Error(), fifo+" is a named pipe") {
			t.Fatalf("named pipe: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("File blocks on a named pipe without a writer")
	}
}

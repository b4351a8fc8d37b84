package boundedread_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironlink/ironlink/internal/boundedread"
)

func TestFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := boundedread.File(small, 5); err != nil || string(b) != "12345" {
		t.Fatalf("file at the limit: %q %v", b, err)
	}
	_, err := boundedread.File(small, 4)
	if !errors.Is(err, boundedread.ErrTooLarge) || !strings.Contains(err.Error(), small) || !strings.Contains(err.Error(), "4 bytes") {
		t.Fatalf("file over the limit: %v", err)
	}
	if _, err := boundedread.File(filepath.Join(dir, "missing"), 5); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	// A device that never ends is refused at the limit, not read for ever.
	if _, err := boundedread.File("/dev/zero", 1<<20); !errors.Is(err, boundedread.ErrTooLarge) {
		t.Fatalf("/dev/zero: %v", err)
	}
}

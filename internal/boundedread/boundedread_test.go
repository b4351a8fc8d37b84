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
	// A device that never ends is refused at once, not read for ever.
	if _, err := boundedread.File("/dev/zero", 1<<20); !errors.Is(err, boundedread.ErrNotRegular) || !strings.Contains(err.Error(), "/dev/zero is a device") {
		t.Fatalf("/dev/zero: %v", err)
	}
	// A directory is named once, as a directory.
	if _, err := boundedread.File(dir, 5); !errors.Is(err, boundedread.ErrNotRegular) || err.Error() != dir+" is a directory: not a regular file (is it the right file?)" {
		t.Fatalf("directory: %v", err)
	}
	// A symbolic link to a regular file (a Kubernetes Secret volume) is read.
	link := filepath.Join(dir, "link")
	if err := os.Symlink(small, link); err != nil {
		t.Fatal(err)
	}
	if b, err := boundedread.File(link, 5); err != nil || string(b) != "12345" {
		t.Fatalf("symbolic link: %q %v", b, err)
	}
}

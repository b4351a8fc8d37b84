// Package boundedread reads the files an operator points ironlink at
// (roster, policy, keys, CA bundles, the CLI's config) with a size limit, so
// that a wrong path (a log file, /dev/zero, an image) is a clear error
// instead of a process that reads until it runs out of memory.
package boundedread

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Limits for the kinds of file ironlink reads, in bytes. A roster of 100,000
// satellites with one PEM public key each is about 30 MiB.
const (
	// ConfigLimit bounds roster and policy files: 64 MiB.
	ConfigLimit = 64 << 20
	// SmallLimit bounds keys, CA bundles and the CLI's config: 4 MiB.
	SmallLimit = 4 << 20
)

// ErrTooLarge is wrapped by File's error for a file over its limit.
var ErrTooLarge = errors.New("file too large")

// File returns the contents of the file at path, at most limit bytes. A
// larger file is an error wrapping ErrTooLarge that names the path and the
// limit; the errors of os.Open and Read are returned wrapped (errors.Is
// fs.ErrNotExist holds for a missing file).
func File(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: %w: larger than %d bytes (is it the right file?)", path, ErrTooLarge, limit)
	}
	return data, nil
}

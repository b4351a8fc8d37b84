// Package boundedread reads the files an operator points ironlink at
// (roster, policy, keys, CA bundles, the CLI's config) with a size limit, so
// that a wrong path (a log file, /dev/zero, an image) is a clear error
// instead of a process that reads until it runs out of memory.
package boundedread

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
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

// ErrNotRegular is wrapped by File's error for a path that is not a
// regular file (after symbolic links): a directory, a named pipe, a
// device such as /dev/zero.
var ErrNotRegular = errors.New("not a regular file")

// File returns the contents of the regular file at path, at most limit
// bytes. A larger file is an error wrapping ErrTooLarge that names the path
// and the limit; a directory, named pipe, socket or device is an error
// wrapping ErrNotRegular that names the path, returned at once (opening a
// named pipe does not wait for a writer, a device is not read). The errors
// of os.Open and Read are returned wrapped (errors.Is fs.ErrNotExist holds
// for a missing file).
func File(path string, limit int64) ([]byte, error) {
	// O_NONBLOCK: open(2) of a named pipe without a writer would block
	// for ever; on a regular file the flag changes nothing.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is %s: %w (is it the right file?)", path, kind(fi.Mode()), ErrNotRegular)
	}
	return Read(f, path, limit)
}

// Read returns all of r, at most limit bytes; name says what r is in the
// errors (a path, "standard input"). More is an error wrapping ErrTooLarge
// naming it and the limit; a read error is returned wrapped with name
// unless it names a path already.
func Read(r io.Reader, name string, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, err // names the path already
		}
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: %w: larger than %d bytes (is it the right file?)", name, ErrTooLarge, limit)
	}
	return data, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "a special file"
	}
}

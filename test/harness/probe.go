package harness

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// ProcStatusKiB reads a field of /proc/<pid>/status given in kB (VmRSS:
// resident memory; VmHWM: its peak), in KiB. Errors: the file unreadable,
// the field missing or not a number.
func ProcStatusKiB(pid int, field string) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", field, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				return 0, fmt.Errorf("%s: %w", field, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// OversizedListSites is an encoded ListSitesRequest of n bytes (plus its
// field header): an unknown field, which the hub would skip, carrying the
// bulk — the outside probe of the hub's request size limits.
func OversizedListSites(n int) []byte {
	b := protowire.AppendTag(nil, 9999, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	return append(b, make([]byte, n)...)
}

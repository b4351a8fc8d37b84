package app

import (
	"log/slog"
	"math"
	"os"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// MemoryLimitRatio is the share of the container's memory limit (the
// cgroup's memory.max, or memory.limit_in_bytes under cgroup v1) the hub
// gives the Go runtime as its soft memory limit when GOMEMLIMIT is unset:
// the garbage collector works harder as the heap nears it, so a replica
// holding many links collects before the kernel kills it for memory, and
// the remaining 10 % is left to what the cgroup charges and the runtime
// does not count (the kernel's socket buffers of the links, the binary's
// mapped pages). See docs/design/performance.md "Memory limit".
const MemoryLimitRatio = 0.9

// Environment variables read by setMemoryLimit (the names the Go runtime
// and github.com/KimMachineGun/automemlimit read).
const (
	envGoMemLimit   = "GOMEMLIMIT"
	envAutoMemLimit = "AUTOMEMLIMIT"
)

// setMemoryLimit sets the Go runtime's soft memory limit from the cgroup
// the hub runs in (limitOf: memlimit.FromCgroup, the cgroup's memory
// limit) to MemoryLimitRatio of it, unless GOMEMLIMIT is set (the runtime
// already applied it) or AUTOMEMLIMIT is "off" (a number in (0, 1] there
// replaces the ratio; empty is unset). It logs the limit in force and where it came from
// (source GOMEMLIMIT, AUTOMEMLIMIT, cgroup, or cgroup_unlimited when the
// cgroup sets none), and returns it in bytes (math.MaxInt64: no limit). A
// cgroup that cannot be read (not Linux, no memory controller) is logged
// and leaves the runtime's limit alone: it is never a reason not to serve.
func setMemoryLimit(log *slog.Logger, limitOf memlimit.Provider) int64 {
	if v, ok := os.LookupEnv(envAutoMemLimit); ok && v == "" {
		os.Unsetenv(envAutoMemLimit) // empty is unset (the library refuses it)
	}
	source := "cgroup"
	switch {
	case os.Getenv(envGoMemLimit) != "":
		source = envGoMemLimit
	case os.Getenv(envAutoMemLimit) == "off":
		source = envAutoMemLimit
	}
	limit, err := memlimit.Set(memlimit.WithRatio(MemoryLimitRatio), memlimit.WithProvider(limitOf))
	if err != nil {
		log.Warn("set the Go memory limit from the cgroup's; running with the runtime's", "gomemlimit_bytes", limit, "err", err)
		return limit
	}
	if source == "cgroup" && limit == math.MaxInt64 {
		source = "cgroup_unlimited"
	}
	log.Info("Go memory limit", "gomemlimit_bytes", limit, "source", source)
	return limit
}

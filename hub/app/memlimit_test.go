package app

import (
	"bytes"
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TestSetMemoryLimit: GOMEMLIMIT and AUTOMEMLIMIT=off leave the runtime's
// limit alone (and say so in the log); otherwise the limit is
// MemoryLimitRatio (or AUTOMEMLIMIT's ratio) of the cgroup's, or none when
// the cgroup has none.
func TestSetMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	logTo := func() (*slog.Logger, *bytes.Buffer) {
		var b bytes.Buffer
		return slog.New(slog.NewTextHandler(&b, nil)), &b
	}

	t.Run("GOMEMLIMIT", func(t *testing.T) {
		t.Setenv(envGoMemLimit, "300MiB")
		log, b := logTo()
		if got := setMemoryLimit(log, memlimit.FromCgroup); got != prev {
			t.Errorf("limit %d, want the runtime's %d unchanged", got, prev)
		}
		if !strings.Contains(b.String(), "source=GOMEMLIMIT") {
			t.Errorf("log %q does not name GOMEMLIMIT as the source", b)
		}
	})
	t.Run("off", func(t *testing.T) {
		t.Setenv(envGoMemLimit, "")
		t.Setenv(envAutoMemLimit, "off")
		log, b := logTo()
		if got := setMemoryLimit(log, memlimit.FromCgroup); got != prev {
			t.Errorf("limit %d, want the runtime's %d unchanged", got, prev)
		}
		if !strings.Contains(b.String(), "source=AUTOMEMLIMIT\n") {
			t.Errorf("log %q does not say AUTOMEMLIMIT=off", b)
		}
	})
	t.Run("cgroup", func(t *testing.T) {
		t.Setenv(envGoMemLimit, "")
		t.Setenv(envAutoMemLimit, "")
		log, b := logTo()
		got := setMemoryLimit(log, memlimit.Limit(1<<30))
		ratio := MemoryLimitRatio
		if want := int64(float64(1<<30) * ratio); got != want || debug.SetMemoryLimit(-1) != want {
			t.Errorf("limit %d (runtime %d), want 90 %% of a 1 GiB cgroup limit = %d", got, debug.SetMemoryLimit(-1), want)
		}
		if !strings.Contains(b.String(), "source=cgroup\n") {
			t.Errorf("log %q does not name the cgroup as the source", b)
		}
	})
	t.Run("ratio", func(t *testing.T) {
		t.Setenv(envGoMemLimit, "")
		t.Setenv(envAutoMemLimit, "0.5")
		log, _ := logTo()
		if got, want := setMemoryLimit(log, memlimit.Limit(1<<30)), int64(1<<29); got != want {
			t.Errorf("limit %d, want AUTOMEMLIMIT=0.5 of 1 GiB = %d", got, want)
		}
	})
	t.Run("unlimited", func(t *testing.T) {
		t.Setenv(envGoMemLimit, "")
		t.Setenv(envAutoMemLimit, "")
		log, b := logTo()
		noLimit := func() (uint64, error) { return 0, memlimit.ErrNoLimit }
		if got := setMemoryLimit(log, noLimit); got != math.MaxInt64 {
			t.Errorf("limit %d, want none (MaxInt64) under a cgroup without a limit", got)
		}
		if !strings.Contains(b.String(), "source=cgroup_unlimited") {
			t.Errorf("log %q does not say the cgroup has no limit", b)
		}
	})
	t.Run("unreadable", func(t *testing.T) {
		t.Setenv(envGoMemLimit, "")
		t.Setenv(envAutoMemLimit, "")
		debug.SetMemoryLimit(prev)
		log, b := logTo()
		broken := func() (uint64, error) { return 0, memlimit.ErrCgroupsNotSupported }
		if got := setMemoryLimit(log, broken); got != prev || debug.SetMemoryLimit(-1) != prev {
			t.Errorf("limit %d, want the runtime's %d unchanged", got, prev)
		}
		if !strings.Contains(b.String(), "level=WARN") {
			t.Errorf("log %q has no warning", b)
		}
	})
}

package healthcheck

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// Every string of an event refuses a bidirectional control, naming the
// field; ordinary non-ASCII text (Arabic, Hebrew, accents) passes.
func TestEventRefusesBidiControls(t *testing.T) {
	ok := func() *ironlinkv1.HealthEvent {
		return &ironlinkv1.HealthEvent{Agent: "gpu-mon", ComponentClass: "GPU", CheckName: "GpuXidError", NodeName: "gpu-01",
			Message: "GPU 3 fell off the bus — שגיאה خطأ é", ErrorCodes: []string{"79"}}
	}
	if err := Event(0, ok()); err != nil {
		t.Fatalf("a good event: %v", err)
	}
	for _, r := range []rune{0x061c, 0x200e, 0x200f, 0x202a, 0x202e, 0x2066, 0x2069} {
		e := ok()
		e.Message = "fine " + string(r) + "x"
		var he *Error
		if err := Event(2, e); !errors.As(err, &he) || he.Field != "events[2].message" || he.Reason != "CONTROL_CHARACTER" {
			t.Errorf("U+%04X in message: %v", r, err)
		}
		e = ok()
		e.NodeName = "gpu" + string(r)
		if err := Event(0, e); !errors.As(err, &he) || he.Field != "events[0].node_name" {
			t.Errorf("U+%04X in node_name: %v", r, err)
		}
	}
	for _, name := range []string{"...", "-", "_x", ".GPU"} {
		e := ok()
		e.ComponentClass = name
		var he *Error
		if err := Event(0, e); !errors.As(err, &he) || he.Field != "events[0].component_class" {
			t.Errorf("class %q: %v, want refused", name, err)
		}
	}
}

// A generated time more than MaxAge old is refused, a future one clamped.
func TestGeneratedTime(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		ts      *timestamppb.Timestamp
		refused bool
		clamped bool
	}{
		{"missing", nil, true, false},
		{"1970", timestamppb.New(time.Unix(1, 0)), true, false},
		{"just over 7 days", timestamppb.New(now.Add(-MaxAge - time.Second)), true, false},
		{"7 days", timestamppb.New(now.Add(-MaxAge)), false, false},
		{"an hour ahead", timestamppb.New(now.Add(time.Hour)), false, true},
	} {
		at, clamped, err := GeneratedTime(1, c.ts, now)
		var he *Error
		if c.refused != (err != nil) || (err != nil && (!errors.As(err, &he) || he.Field != "events[1].generated_time")) || clamped != c.clamped {
			t.Errorf("%s: %v %v %v", c.name, at, clamped, err)
		}
		if c.clamped && !at.Equal(now) {
			t.Errorf("%s: clamped to %v, want %v", c.name, at, now)
		}
	}
}

// A device id in any form uuid.Parse reads comes back canonical.
func TestDeviceID(t *testing.T) {
	const want = "0b8e6c1e-1234-4abc-8def-00000000000a"
	for _, in := range []string{want, "0B8E6C1E-1234-4ABC-8DEF-00000000000A", "0b8e6c1e12344abc8def00000000000a", "{" + want + "}", "urn:uuid:" + want} {
		if got, err := DeviceID(0, in); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	if _, err := DeviceID(3, "gpu-01"); err == nil || err.Error() != `events[3].device_id is not a UUID "gpu-01"` {
		t.Errorf("gpu-01: %v", err)
	}
}

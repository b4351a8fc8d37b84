package link

import (
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
)

// MaxHardwareBytes bounds a device's HardwareState on the wire (16 KiB,
// the satellite's own bound); a larger one is refused with
// InvalidArgument.
const MaxHardwareBytes = 16 << 10

// toHardware validates a device's hardware (at field) and converts it to
// its stored form: at most MaxHardwareBytes, a valid read_at, a valid
// inspection_finished_at when set.
func toHardware(where, field string, h *ironlinkv1.HardwareState) (*store.Hardware, error) {
	if n := proto.Size(h); n > MaxHardwareBytes {
		return nil, invalid(where, field, grpcerr.ReasonOutOfRange, "hardware is %d bytes, at most %d", n, MaxHardwareBytes)
	}
	if h.GetReadAt() == nil || h.GetReadAt().CheckValid() != nil {
		return nil, invalid(where, field+".read_at", grpcerr.ReasonInvalidValue, "read_at missing or invalid")
	}
	out := &store.Hardware{ReadAt: h.GetReadAt().AsTime()}
	if t := h.GetInspectionFinishedAt(); t != nil {
		if t.CheckValid() != nil {
			return nil, invalid(where, field+".inspection_finished_at", grpcerr.ReasonInvalidValue, "inspection_finished_at invalid")
		}
		at := t.AsTime()
		out.InspectionFinishedAt = &at
	}
	b, err := protojson.Marshal(h)
	if err != nil {
		return nil, invalid(where, field, grpcerr.ReasonInvalidValue, "hardware: %v", err)
	}
	out.JSON = b
	return out, nil
}

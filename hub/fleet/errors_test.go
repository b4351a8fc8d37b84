package fleet_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// wire encodes a request of method by hand from (field name, value)
// pairs, so a string may hold bytes that proto.Marshal would refuse
// (invalid UTF-8). Values: string, bool, int32, []int32 (repeated enum).
func wire(method string, kv ...any) []byte {
	md := replyOf(method + "Request").(proto.Message).ProtoReflect().Descriptor()
	var b []byte
	for i := 0; i+1 < len(kv); i += 2 {
		fd := md.Fields().ByName(protoreflect.Name(kv[i].(string)))
		if fd == nil {
			panic("wire: no field " + kv[i].(string) + " in " + string(md.FullName()))
		}
		num := fd.Number()
		switch v := kv[i+1].(type) {
		case string:
			b = protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), v)
		case bool:
			b = protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), protowire.EncodeBool(v))
		case int32:
			b = protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), uint64(int64(v)))
		case []int32:
			for _, e := range v {
				b = protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), uint64(int64(e)))
			}
		default:
			panic("wire: unsupported value")
		}
	}
	return b
}

// Full method names, for raw calls.
const (
	mListDevices  = ironlinkv1.FleetService_ListDevices_FullMethodName
	mGetDevice    = ironlinkv1.FleetService_GetDevice_FullMethodName
	mQuarantine   = ironlinkv1.FleetService_QuarantineDevice_FullMethodName
	mRelease      = ironlinkv1.FleetService_ReleaseDevice_FullMethodName
	mGetCommand   = ironlinkv1.FleetService_GetCommand_FullMethodName
	mListCommands = ironlinkv1.FleetService_ListCommands_FullMethodName
	mListSites    = ironlinkv1.FleetService_ListSites_FullMethodName
)

// replyOf returns a fresh response message for method (and the request
// message for method+"Request").
func replyOf(method string) any {
	switch method {
	case mListDevices + "Request":
		return &ironlinkv1.ListDevicesRequest{}
	case mGetDevice + "Request":
		return &ironlinkv1.GetDeviceRequest{}
	case mQuarantine + "Request":
		return &ironlinkv1.QuarantineDeviceRequest{}
	case mRelease + "Request":
		return &ironlinkv1.ReleaseDeviceRequest{}
	case mGetCommand + "Request":
		return &ironlinkv1.GetCommandRequest{}
	case mListCommands + "Request":
		return &ironlinkv1.ListCommandsRequest{}
	case mListSites + "Request":
		return &ironlinkv1.ListSitesRequest{}
	case mListDevices:
		return &ironlinkv1.ListDevicesResponse{}
	case mGetDevice:
		return &ironlinkv1.GetDeviceResponse{}
	case mQuarantine:
		return &ironlinkv1.QuarantineDeviceResponse{}
	case mRelease:
		return &ironlinkv1.ReleaseDeviceResponse{}
	case mGetCommand:
		return &ironlinkv1.GetCommandResponse{}
	case mListCommands:
		return &ironlinkv1.ListCommandsResponse{}
	case mListSites:
		return &ironlinkv1.ListSitesResponse{}
	}
	panic("unknown method " + method)
}

// TestBadTextIsInvalidArgument (issue 9 item 4): NUL bytes, control
// characters and invalid UTF-8 get InvalidArgument naming the field, and
// nothing changes in PostgreSQL. Before: a NUL in a reason was
// "Unavailable: database unavailable; retry" (PostgreSQL refuses 0x00, so
// clients retried for ever) and invalid UTF-8 anywhere was Internal
// (grpc-go's decoder).
func TestBadTextIsInvalidArgument(t *testing.T) {
	h := newTestHub(t)
	dev := h.Devices[1]
	tests := []struct {
		name       string
		method     string
		body       []byte
		wantReason string
		wantField  string
	}{
		{"NUL in a quarantine reason", mQuarantine, wire(mQuarantine, "device_id", dev, "reason", "Xid\x0079"), textcheck.ReasonControlChar, "reason"},
		{"NUL in a release reason", mRelease, wire(mRelease, "device_id", dev, "reason", "\x00"), textcheck.ReasonControlChar, "reason"},
		{"escape sequence in a reason", mQuarantine, wire(mQuarantine, "device_id", dev, "reason", "ok\x1b[2Jfake log line"), textcheck.ReasonControlChar, "reason"},
		{"carriage return in a reason", mQuarantine, wire(mQuarantine, "device_id", dev, "reason", "a\rb"), textcheck.ReasonControlChar, "reason"},
		{"invalid UTF-8 reason", mQuarantine, wire(mQuarantine, "device_id", dev, "reason", "\xff\xfe"), grpcerr.ReasonInvalidUTF8, "reason"},
		{"invalid UTF-8 device id", mQuarantine, wire(mQuarantine, "device_id", "\xc3"+dev[1:], "reason", "x"), grpcerr.ReasonInvalidUTF8, "device_id"},
		{"invalid UTF-8 site filter", mListDevices, wire(mListDevices, "site", "dem\xff"), grpcerr.ReasonInvalidUTF8, "site"},
		{"invalid UTF-8 page token", mListCommands, wire(mListCommands, "page_token", "\xff"), grpcerr.ReasonInvalidUTF8, "page_token"},
		{"NUL in a site filter", mListCommands, wire(mListCommands, "site", "demo\x00"), grpcerr.ReasonInvalidValue, "site"},
		{"NUL in a device id", mGetDevice, wire(mGetDevice, "device_id", dev+"\x00"), grpcerr.ReasonNotUUID, "device_id"},
		{"NUL in a command id", mGetCommand, wire(mGetCommand, "command_id", "\x00"), grpcerr.ReasonNotUUID, "command_id"},
		{"truncated message", mQuarantine, []byte{0x0a, 0x7f, 'a'}, grpcerr.ReasonMalformedMessage, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			before := tableChecksum(t, h.Store.Pool())
			err := h.Raw(ctx, tc.method, tc.body, replyOf(tc.method))
			if status.Code(err) != codes.InvalidArgument || grpcerr.Reason(err) != tc.wantReason {
				t.Fatalf("got %v reason %q, want InvalidArgument %s", err, grpcerr.Reason(err), tc.wantReason)
			}
			if want := []string{tc.wantField}; tc.wantField != "" && !slices.Equal(grpcerr.Fields(err), want) {
				t.Fatalf("field violations %v, want %v", grpcerr.Fields(err), want)
			}
			if after := tableChecksum(t, h.Store.Pool()); after != before {
				t.Fatalf("tables changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	// Tab and newline are text: a multi-line reason is stored as sent, and
	// the checksum sees that write (so the checks above can fail).
	before := tableChecksum(t, h.Store.Pool())
	r, err := h.Fleet.QuarantineDevice(context.Background(), &ironlinkv1.QuarantineDeviceRequest{DeviceId: dev, Reason: "GPU 3:\tXid 79\nGPU 5:\tXid 48"})
	if err != nil || r.GetCommand().GetReason() != "GPU 3:\tXid 79\nGPU 5:\tXid 48" {
		t.Fatalf("multi-line reason: %v %v", r, err)
	}
	if tableChecksum(t, h.Store.Pool()) == before {
		t.Fatal("the table checksum missed a quarantine")
	}
}

// TestErrorsNeverEchoUnboundedInput (issue 9 item 5): a 1 MB id, site name
// or reason is echoed in neither the error reply nor the hub's log lines.
// Before: the whole value came back in the status message and in the
// per-RPC log line.
func TestErrorsNeverEchoUnboundedInput(t *testing.T) {
	h := newTestHub(t)
	big := strings.Repeat("A", 1<<20)
	tests := []struct {
		name   string
		method string
		body   []byte
		want   codes.Code
	}{
		{"1 MB device id", mGetDevice, wire(mGetDevice, "device_id", big), codes.InvalidArgument},
		{"1 MB device id in a quarantine", mQuarantine, wire(mQuarantine, "device_id", big, "reason", "x"), codes.InvalidArgument},
		{"1 MB command id", mGetCommand, wire(mGetCommand, "command_id", big), codes.InvalidArgument},
		{"1 MB device filter", mListCommands, wire(mListCommands, "device_id", big), codes.InvalidArgument},
		{"1 MB site name", mListDevices, wire(mListDevices, "site", big), codes.InvalidArgument},
		{"1 MB site name of commands", mListCommands, wire(mListCommands, "site", strings.ToLower(big)), codes.InvalidArgument},
		{"1 MB page token", mListDevices, wire(mListDevices, "page_token", big), codes.InvalidArgument},
		{"1 MB reason", mQuarantine, wire(mQuarantine, "device_id", h.Devices[1], "reason", big), codes.InvalidArgument},
		{"a 1000-byte reason with a NUL", mRelease, wire(mRelease, "device_id", h.Devices[1], "reason", big[:1000]+"\x00"), codes.InvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := h.Raw(ctx, tc.method, tc.body, replyOf(tc.method))
			st := status.Convert(err)
			if st.Code() != tc.want {
				t.Fatalf("code %v, want %v", st.Code(), tc.want)
			}
			if n := len(st.Message()); n > 300 {
				t.Fatalf("status message is %d bytes: %.120q…", n, st.Message())
			}
			for _, d := range st.Details() {
				if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()[0].GetDescription()) > 300 {
					t.Fatalf("field violation is %d bytes", len(br.GetFieldViolations()[0].GetDescription()))
				}
			}
			if n := h.Log.Longest(); n > 4096 {
				t.Fatalf("a hub log line is %d bytes", n)
			}
		})
	}
	if !strings.Contains(h.Log.String(), "code=InvalidArgument") {
		t.Fatalf("the RPCs were not logged:\n%.2000s", h.Log.String())
	}
}

// TestUnknownNamesAreNotFound (issue 9 item 6): listing a site or device
// that does not exist is NotFound (as GetDevice is) with a ResourceInfo;
// an existing site or device with nothing to list is an empty list.
// Before: every case answered an empty list.
func TestUnknownNamesAreNotFound(t *testing.T) {
	h := newTestHub(t)
	ctx := context.Background()
	unknownDevice := uuid.NewString()
	tests := []struct {
		name         string
		call         func() (int, error)
		want         codes.Code
		wantResource string
	}{
		{"devices of an unknown site", func() (int, error) {
			r, err := h.Fleet.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "demo-typo"})
			return len(r.GetDevices()), err
		}, codes.NotFound, "site"},
		{"devices of an unknown site with filters", func() (int, error) {
			r, err := h.Fleet.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "nope", InstanceMismatch: true, PageSize: 5})
			return len(r.GetDevices()), err
		}, codes.NotFound, "site"},
		{"commands of an unknown site", func() (int, error) {
			r, err := h.Fleet.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{Site: "demo-typo"})
			return len(r.GetCommands()), err
		}, codes.NotFound, "site"},
		{"commands of an unknown device", func() (int, error) {
			r, err := h.Fleet.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{DeviceId: unknownDevice})
			return len(r.GetCommands()), err
		}, codes.NotFound, "device"},
		{"commands of an unknown device on a known site", func() (int, error) {
			r, err := h.Fleet.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{Site: "demo", DeviceId: unknownDevice})
			return len(r.GetCommands()), err
		}, codes.NotFound, "device"},
		{"get an unknown device", func() (int, error) {
			_, err := h.Fleet.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: unknownDevice})
			return 0, err
		}, codes.NotFound, "device"},
		{"get an unknown command", func() (int, error) {
			_, err := h.Fleet.GetCommand(ctx, &ironlinkv1.GetCommandRequest{CommandId: unknownDevice})
			return 0, err
		}, codes.NotFound, "command"},
		{"a site without devices is an empty list", func() (int, error) {
			r, err := h.Fleet.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "empty"})
			return len(r.GetDevices()), err
		}, codes.OK, ""},
		{"a filter that matches nothing is an empty list", func() (int, error) {
			r, err := h.Fleet.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "demo", InstanceMismatch: true})
			return len(r.GetDevices()), err
		}, codes.OK, ""},
		{"commands of a site without commands", func() (int, error) {
			r, err := h.Fleet.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{Site: "empty"})
			return len(r.GetCommands()), err
		}, codes.OK, ""},
		{"commands of a device without commands", func() (int, error) {
			r, err := h.Fleet.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{DeviceId: h.Devices[2]})
			return len(r.GetCommands()), err
		}, codes.OK, ""},
		{"commands of a known device on another site", func() (int, error) {
			r, err := h.Fleet.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{Site: "empty", DeviceId: h.Devices[0]})
			return len(r.GetCommands()), err
		}, codes.OK, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := tc.call()
			if got := status.Code(err); got != tc.want {
				t.Fatalf("code %v (%v), want %v", got, err, tc.want)
			}
			if tc.want == codes.OK {
				if n != 0 {
					t.Fatalf("%d items, want none", n)
				}
				return
			}
			if grpcerr.Reason(err) != grpcerr.ReasonNotFound || resourceType(err) != tc.wantResource {
				t.Fatalf("reason %q resource %q, want NOT_FOUND %s", grpcerr.Reason(err), resourceType(err), tc.wantResource)
			}
		})
	}
	// The listings that have something still list it.
	r, err := h.Fleet.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "demo"})
	if err != nil || len(r.GetDevices()) != 3 {
		t.Fatalf("demo devices: %d %v", len(r.GetDevices()), err)
	}
	c, err := h.Fleet.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{DeviceId: h.Devices[0]})
	if err != nil || len(c.GetCommands()) != 1 || c.GetCommands()[0].GetCommandId() != h.Command {
		t.Fatalf("commands of the quarantined device: %v %v", c.GetCommands(), err)
	}
}

func resourceType(err error) string {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.ResourceInfo); ok {
			return ri.GetResourceType()
		}
	}
	return ""
}

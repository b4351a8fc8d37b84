package fleet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// The fuzz targets send every FleetService request, built from fuzzed
// fields (strings may be any bytes, enums any number), to a real hub (see
// newTestHub: PostgreSQL, the production interceptor chain and codec) and
// check the property of issue 9 item 9 on every call:
//
//   - the code is OK, InvalidArgument or NotFound: never Internal or Unknown
//     (a panic is recovered as Internal), never Unavailable (PostgreSQL is up,
//     so Unavailable means the hub passed it a value it refused);
//   - a refused call (and any read) changed no row of any table;
//   - the reply's message and every hub log line stay short (no echo of
//     unbounded input).
//
// Seeds are the grpcurl examples of docs/reference/api.md ("Talking to
// the hub with grpcurl"), with $DEVICE and $COMMAND standing for a device and a command
// of the seeded site "demo". Run one for longer with e.g.
//
//	go test ./hub/fleet -run '^$' -fuzz '^FuzzQuarantineDevice$' -fuzztime 60s

// fuzzHub is a testHub and the checksum of its tables after the last call.
type fuzzHub struct {
	*testHub
	sum string
}

func newFuzzHub(f *testing.F) *fuzzHub {
	h := newTestHub(f)
	return &fuzzHub{testHub: h, sum: tableChecksum(f, h.Store.Pool())}
}

// expand replaces the examples' placeholders with ids of the seeded hub.
func (h *fuzzHub) expand(s string) string {
	return strings.NewReplacer("$DEVICE", h.Devices[0], "$COMMAND", h.Command).Replace(s)
}

// check sends body to method and asserts the property above. writes says
// whether a successful call may change the tables (quarantine, release).
func (h *fuzzHub) check(t *testing.T, method string, body []byte, writes bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := h.Raw(ctx, method, body, replyOf(method))
	st := status.Convert(err)
	switch st.Code() {
	case codes.OK, codes.InvalidArgument, codes.NotFound:
	default:
		t.Fatalf("%s answered %v: %.300q", method, st.Code(), st.Message())
	}
	if n := len(st.Message()); n > 2048 {
		t.Fatalf("%s: status message of %d bytes", method, n)
	}
	if n := h.Log.Longest(); n > 8192 {
		t.Fatalf("%s: a hub log line of %d bytes", method, n)
	}
	after := tableChecksum(t, h.Store.Pool())
	if after != h.sum && (err != nil || !writes) {
		t.Fatalf("%s (%v) changed the tables:\nbefore %s\nafter  %s", method, st.Code(), h.sum, after)
	}
	h.sum = after
}

// enums turns fuzzed bytes into repeated enum values (any number, valid or not).
func enums(b []byte) []int32 {
	out := make([]int32, len(b))
	for i, v := range b {
		out[i] = int32(int8(v)) // negative values too
	}
	return out
}

func enumBytes[E ~int32](es []E) []byte {
	var b []byte
	for _, e := range es {
		b = append(b, byte(e))
	}
	return b
}

// fromJSON parses a docs example into a request.
func fromJSON[M proto.Message](f *testing.F, m M, js string) M {
	f.Helper()
	if err := protojson.Unmarshal([]byte(js), m); err != nil {
		f.Fatalf("seed %s: %v", js, err)
	}
	return m
}

func FuzzListDevices(f *testing.F) {
	for _, js := range []string{
		`{}`,
		`{"site":"demo","page_size":5}`,
		`{"statuses":["OPERATIONAL_STATUS_FAULTED","OPERATIONAL_STATUS_MAINTENANCE"]}`,
		`{"instance_mismatch":true}`,
		`{"impairments":["IMPAIRMENT_STATE_QUARANTINED"]}`,
		`{"site":"empty"}`,
		`{"site":"demo-typo"}`,
		`{"site":"demo","page_size":1,"page_token":"bm9wZQ"}`,
	} {
		r := fromJSON(f, &ironlinkv1.ListDevicesRequest{}, js)
		f.Add(r.GetSite(), enumBytes(r.GetStatuses()), r.GetPageSize(), r.GetPageToken(), r.GetIncludeRemoved(), enumBytes(r.GetImpairments()), r.GetInstanceMismatch())
	}
	f.Add("dem\xff", []byte{0}, int32(-1), "\x00", true, []byte{9}, false)
	h := newFuzzHub(f)
	f.Fuzz(func(t *testing.T, site string, statuses []byte, pageSize int32, pageToken string, includeRemoved bool, impairments []byte, instanceMismatch bool) {
		h.check(t, mListDevices, wire(mListDevices, "site", site, "statuses", enums(statuses), "page_size", pageSize,
			"page_token", pageToken, "include_removed", includeRemoved, "impairments", enums(impairments), "instance_mismatch", instanceMismatch), false)
	})
}

func FuzzGetDevice(f *testing.F) {
	readme := fromJSON(f, &ironlinkv1.GetDeviceRequest{}, `{"device_id":"$DEVICE"}`)
	f.Add(readme.GetDeviceId(), readme.GetHistoryLimit())
	f.Add("$DEVICE", int32(1001))
	f.Add("0c1d5b6e-0000-4000-8000-000000000001", int32(5))
	f.Add("node-001'; DROP TABLE devices;--", int32(-1))
	h := newFuzzHub(f)
	f.Fuzz(func(t *testing.T, deviceID string, historyLimit int32) {
		h.check(t, mGetDevice, wire(mGetDevice, "device_id", h.expand(deviceID), "history_limit", historyLimit), false)
	})
}

// impairmentSeeds are the docs' quarantine and release examples.
func impairmentSeeds(f *testing.F) {
	for _, js := range []string{
		`{"device_id":"$DEVICE","reason":"GPU 3 throws Xid 79"}`,
		`{"device_id":"$DEVICE","reason":"GPU replaced"}`,
	} {
		r := fromJSON(f, &ironlinkv1.QuarantineDeviceRequest{}, js)
		f.Add(r.GetDeviceId(), r.GetReason())
	}
	f.Add("$DEVICE", "Xid\x0079")
	f.Add("$DEVICE", "\xff\xfe")
	f.Add("$DEVICE", "line one\nline two\twith a tab")
	f.Add("$DEVICE", "  ")
	f.Add("{$DEVICE}", "braces")
	f.Add("0C1D5B6E-0000-4000-8000-000000000001", "unknown")
	f.Add("", "")
}

func FuzzQuarantineDevice(f *testing.F) {
	impairmentSeeds(f)
	h := newFuzzHub(f)
	f.Fuzz(func(t *testing.T, deviceID, reason string) {
		h.check(t, mQuarantine, wire(mQuarantine, "device_id", h.expand(deviceID), "reason", reason), true)
	})
}

func FuzzReleaseDevice(f *testing.F) {
	impairmentSeeds(f)
	h := newFuzzHub(f)
	f.Fuzz(func(t *testing.T, deviceID, reason string) {
		h.check(t, mRelease, wire(mRelease, "device_id", h.expand(deviceID), "reason", reason), true)
	})
}

func FuzzGetCommand(f *testing.F) {
	f.Add(fromJSON(f, &ironlinkv1.GetCommandRequest{}, `{"command_id":"$COMMAND"}`).GetCommandId())
	f.Add("<command_id from the answer>")
	f.Add("")
	h := newFuzzHub(f)
	f.Fuzz(func(t *testing.T, commandID string) {
		h.check(t, mGetCommand, wire(mGetCommand, "command_id", h.expand(commandID)), false)
	})
}

func FuzzListCommands(f *testing.F) {
	for _, js := range []string{
		`{"device_id":"$DEVICE"}`,
		`{}`,
		`{"site":"demo","states":["COMMAND_STATE_PENDING"],"page_size":1}`,
		`{"site":"empty"}`,
		`{"site":"nope"}`,
		`{"page_token":"MQ"}`,
	} {
		r := fromJSON(f, &ironlinkv1.ListCommandsRequest{}, js)
		f.Add(r.GetDeviceId(), r.GetSite(), enumBytes(r.GetStates()), r.GetPageSize(), r.GetPageToken())
	}
	h := newFuzzHub(f)
	f.Fuzz(func(t *testing.T, deviceID, site string, states []byte, pageSize int32, pageToken string) {
		h.check(t, mListCommands, wire(mListCommands, "device_id", h.expand(deviceID), "site", site, "states", enums(states),
			"page_size", pageSize, "page_token", pageToken), false)
	})
}

// FuzzListSites sends arbitrary bytes as the (empty) request: unknown
// fields are ignored, malformed wire data is InvalidArgument.
func FuzzListSites(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x02, 'h', 'i'})
	f.Add([]byte{0x0a, 0x7f})
	h := newFuzzHub(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		h.check(t, mListSites, body, false)
	})
}

package fleet_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// FuzzRetryCommand is the fuzz property of fuzz_test.go for RetryCommand,
// whose refusals include FailedPrecondition (the seeded command is PENDING,
// not FAILED): the code is OK, InvalidArgument, NotFound or
// FailedPrecondition; a refused call changes no row; replies and log lines
// stay short.
func FuzzRetryCommand(f *testing.F) {
	f.Add("$COMMAND", "node re-enrolled")
	f.Add("<a FAILED command_id>", "node re-enrolled")
	f.Add("$COMMAND", "")
	f.Add("$COMMAND", "a\x00b")
	f.Add("$COMMAND", "\xff")
	f.Add("", "")
	h := newFuzzHub(f)
	f.Fuzz(func(t *testing.T, commandID, reason string) {
		var body []byte
		body = protowire.AppendTag(body, 1, protowire.BytesType)
		body = protowire.AppendString(body, h.expand(commandID))
		body = protowire.AppendTag(body, 2, protowire.BytesType)
		body = protowire.AppendString(body, reason)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err := h.Raw(ctx, ironlinkv1.FleetService_RetryCommand_FullMethodName, body, &ironlinkv1.RetryCommandResponse{})
		st := status.Convert(err)
		switch st.Code() {
		case codes.OK, codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition:
		default:
			t.Fatalf("RetryCommand answered %v: %.300q", st.Code(), st.Message())
		}
		if n := len(st.Message()); n > 2048 {
			t.Fatalf("status message of %d bytes", n)
		}
		if n := h.Log.Longest(); n > 8192 {
			t.Fatalf("a hub log line of %d bytes", n)
		}
		after := tableChecksum(t, h.Store.Pool())
		if after != h.sum && err != nil {
			t.Fatalf("a refused RetryCommand (%v) changed the tables", st.Code())
		}
		h.sum = after
	})
}

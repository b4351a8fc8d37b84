package hostile

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/grpcraw"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/grpctest"
)

// unaryMethods are the unary methods of the operator services a production
// hub serves over the same chain (FleetService, BulkService,
// OperationService, PolicyService), by full name.
func unaryMethods(tb testing.TB) []protoreflect.MethodDescriptor {
	var out []protoreflect.MethodDescriptor
	for _, sd := range []grpc.ServiceDesc{ironlinkv1.FleetService_ServiceDesc, ironlinkv1.BulkService_ServiceDesc, ironlinkv1.OperationService_ServiceDesc,
		ironlinkv1.PolicyService_ServiceDesc} {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(sd.ServiceName))
		if err != nil {
			tb.Fatal(err)
		}
		ms := d.(protoreflect.ServiceDescriptor).Methods()
		for i := range ms.Len() {
			if m := ms.Get(i); !m.IsStreamingClient() && !m.IsStreamingServer() {
				out = append(out, m)
			}
		}
	}
	return out
}

// FuzzOperatorRequest (issue 9 item 9 for the operator services added after
// FleetService's targets): any bytes as the request of any unary method of
// FleetService, BulkService, OperationService or PolicyService, on a hub wired as in
// production (test/grpctest, --no-auth) over PostgreSQL. Seeds are each
// method's request with plausible fields (a real device, site, command).
// Property: never Internal, Unknown or Unavailable (a recovered panic is
// Internal); a refused call changes no table; the status message stays
// under 2 KiB and no hub log line exceeds 8 KiB. Run it with e.g.
//
//	go test ./test/hostile -run '^$' -fuzz '^FuzzOperatorRequest$' -fuzztime 60s
func FuzzOperatorRequest(f *testing.F) {
	ctx := context.Background()
	o := newOperatorSite(f, slog.LevelInfo)
	url, st, dev, cmd, ll, log := o.url, o.st, o.dev, o.cmd, o.ll, o.log
	h := grpctest.Start(f, st, grpctest.Options{NoAuth: true, Log: log})
	cc := h.Dial(f, grpc.WithDefaultCallOptions(grpc.ForceCodecV2(grpcraw.Codec{})))
	methods := unaryMethods(f)
	plausible := map[string]string{"device_id": dev, "site": "site-a", "command_id": cmd.ID, "operation_id": uuid.NewString(),
		"reason": "fuzz", "devices": dev, "device_ids": dev, "name": "node-1", "device": dev}
	for i, m := range methods {
		req := dynamicpb.NewMessage(m.Input())
		fill(req, plausible)
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), b)
	}
	f.Add(uint8(0), []byte{0x0a, 0x7f, 'a'})
	f.Add(uint8(1), []byte{0x0a, 0x02, 0xff, 0xfe})
	sum := pgtest.Checksums(f, url, "jti_replay")
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		m := methods[int(which)%len(methods)]
		full := "/" + string(m.Parent().FullName()) + "/" + string(m.Name())
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		err := cc.Invoke(cctx, full, &body, dynamicpb.NewMessage(m.Output()))
		s := status.Convert(err)
		switch s.Code() {
		case codes.Internal, codes.Unknown, codes.Unavailable, codes.DeadlineExceeded:
			t.Fatalf("%s answered %v: %.300q", m.Name(), s.Code(), s.Message())
		}
		if n := len(s.Message()); n > 2048 {
			t.Fatalf("%s: status message of %d bytes", m.Name(), n)
		}
		ll.mu.Lock()
		longest := ll.longest
		ll.mu.Unlock()
		if longest > 8192 {
			t.Fatalf("%s: a hub log line of %d bytes", m.Name(), longest)
		}
		after := pgtest.Checksums(t, url, "jti_replay")
		if err != nil {
			if changed := pgtest.ChangedTables(sum, after); len(changed) > 0 {
				t.Fatalf("%s refused (%v %.200q) but changed %v", m.Name(), s.Code(), s.Message(), changed)
			}
		}
		sum = after
	})
}

package hostile

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/test/grpctest"
)

// longestLine is an io.Writer for slog that keeps the longest line seen.
type longestLine struct {
	mu      sync.Mutex
	longest int
	line    string
}

func (l *longestLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range bytes.Split(p, []byte("\n")) {
		if len(line) > l.longest {
			l.longest, l.line = len(line), string(line[:min(len(line), 200)])
		}
	}
	return len(p), nil
}

// TestOperatorAPIBoundsEveryEcho (issue 9 items 4 and 5 on every operator
// service, not only FleetService): each unary method of FleetService,
// BulkService and OperationService is called once per string field of its
// request (top level and one message deep) with that field 1 MiB long and,
// separately, holding a NUL, the other fields plausible (a real device,
// site, command and operation). No answer is Internal, Unknown or
// Unavailable, no status message or field violation exceeds 512 bytes,
// and no hub log line exceeds 4 KiB.
func TestOperatorAPIBoundsEveryEcho(t *testing.T) {
	ctx := context.Background()
	o := newOperatorSite(t, slog.LevelDebug)
	st, dev, cmd, ll, log := o.st, o.dev, o.cmd, o.ll, o.log
	h := grpctest.Start(t, st, grpctest.Options{NoAuth: true, Log: log})
	cc := h.Dial(t, grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(16<<20)))

	plausible := map[string]string{"device_id": dev, "site": "site-a", "command_id": cmd.ID, "operation_id": uuid.NewString(),
		"reason": "probe", "devices": dev, "device_ids": dev, "name": "node-1"}
	big := strings.Repeat("A", 1<<20)
	calls := 0
	byCode := map[codes.Code]int{}
	baseline := map[protoreflect.Name]string{} // each method with only plausible fields
	for _, sd := range []grpc.ServiceDesc{ironlinkv1.FleetService_ServiceDesc, ironlinkv1.BulkService_ServiceDesc, ironlinkv1.OperationService_ServiceDesc} {
		svc, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(sd.ServiceName))
		if err != nil {
			t.Fatal(err)
		}
		methods := svc.(protoreflect.ServiceDescriptor).Methods()
		for i := range methods.Len() {
			m := methods.Get(i)
			if m.IsStreamingServer() || m.IsStreamingClient() {
				continue
			}
			full := "/" + sd.ServiceName + "/" + string(m.Name())
			// Every string field path (top level, and one message deep).
			type path []protoreflect.FieldDescriptor
			var paths []path
			fields := m.Input().Fields()
			for j := range fields.Len() {
				f := fields.Get(j)
				switch f.Kind() {
				case protoreflect.StringKind:
					paths = append(paths, path{f})
				case protoreflect.MessageKind:
					if f.IsMap() {
						continue
					}
					sub := f.Message().Fields()
					for k := range sub.Len() {
						if g := sub.Get(k); g.Kind() == protoreflect.StringKind && !g.IsMap() {
							paths = append(paths, path{f, g})
						}
					}
				}
			}
			base := dynamicpb.NewMessage(m.Input())
			fill(base, plausible)
			bctx, bcancel := context.WithTimeout(ctx, 20*time.Second)
			berr := cc.Invoke(bctx, full, base, dynamicpb.NewMessage(m.Output()))
			bcancel()
			baseline[m.Name()] = status.Code(berr).String()
			for _, p := range paths {
				for _, bad := range []struct{ name, v string }{{"1 MiB", big}, {"NUL", "x\x00y"}} {
					req := dynamicpb.NewMessage(m.Input())
					fill(req, plausible)
					setPath(req, p, bad.v)
					name := fmt.Sprintf("%s %s %s", m.Name(), fieldPath(p), bad.name)
					cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
					out := dynamicpb.NewMessage(m.Output())
					err := cc.Invoke(cctx, full, req, out)
					cancel()
					calls++
					s := status.Convert(err)
					byCode[s.Code()]++
					switch s.Code() {
					case codes.Internal, codes.Unknown, codes.Unavailable, codes.DeadlineExceeded:
						t.Errorf("%s: %v %.200q", name, s.Code(), s.Message())
					}
					if n := len(s.Message()); n > 512 {
						t.Errorf("%s: status message is %d bytes: %.120q…", name, n, s.Message())
					}
					for _, d := range s.Details() {
						if br, ok := d.(*errdetails.BadRequest); ok {
							for _, v := range br.GetFieldViolations() {
								if len(v.GetDescription()) > 512 {
									t.Errorf("%s: field violation is %d bytes", name, len(v.GetDescription()))
								}
							}
						}
					}
					ll.mu.Lock()
					longest, line := ll.longest, ll.line
					ll.longest = 0
					ll.mu.Unlock()
					if longest > 4096 {
						t.Errorf("%s: a hub log line is %d bytes: %s…", name, longest, line)
					}
				}
			}
		}
	}
	t.Logf("%d calls; codes %v; with plausible fields only: %v", calls, byCode, baseline)
}

func fieldPath(p []protoreflect.FieldDescriptor) string {
	var s []string
	for _, f := range p {
		s = append(s, string(f.Name()))
	}
	return strings.Join(s, ".")
}

// fill sets every top-level string field named in plausible, repeated
// strings to one such value, and every enum to its first non-zero value.
func fill(m *dynamicpb.Message, plausible map[string]string) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		v, ok := plausible[string(f.Name())]
		switch {
		case f.Kind() == protoreflect.StringKind && f.IsList() && ok:
			m.Mutable(f).List().Append(protoreflect.ValueOfString(v))
		case f.Kind() == protoreflect.StringKind && !f.IsList() && !f.IsMap() && ok:
			m.Set(f, protoreflect.ValueOfString(v))
		case f.Kind() == protoreflect.EnumKind && !f.IsList() && f.Enum().Values().Len() > 1:
			m.Set(f, protoreflect.ValueOfEnum(f.Enum().Values().Get(1).Number()))
		}
	}
}

// setPath sets the string field at p (one or two deep) to v.
func setPath(m *dynamicpb.Message, p []protoreflect.FieldDescriptor, v string) {
	if len(p) == 2 {
		if p[0].IsList() {
			l := m.Mutable(p[0]).List()
			e := l.NewElement()
			l.Append(e)
			setLeaf(e.Message(), p[1], v)
			return
		}
		setLeaf(m.Mutable(p[0]).Message(), p[1], v)
		return
	}
	setLeaf(m, p[0], v)
}

func setLeaf(m protoreflect.Message, f protoreflect.FieldDescriptor, v string) {
	if f.IsList() {
		l := m.Mutable(f).List()
		l.Truncate(0)
		l.Append(protoreflect.ValueOfString(v))
		return
	}
	m.Set(f, protoreflect.ValueOfString(v))
}

// operatorSite is the hub state the operator-API probes start from: a
// database migrated as in production (url) whose site-a (operations
// capability) has one manageable device node-1 (dev), quarantined by cmd;
// the store and the hub log to ll at level.
type operatorSite struct {
	url string
	st  *store.Store
	dev string
	cmd store.Command
	ll  *longestLine
	log *slog.Logger
}

func newOperatorSite(tb testing.TB, level slog.Level) operatorSite {
	tb.Helper()
	ctx := context.Background()
	o := operatorSite{ll: &longestLine{}, dev: uuid.NewString()}
	o.log = slog.New(slog.NewTextHandler(o.ll, &slog.HandlerOptions{Level: level}))
	st, url := storetest.New(tb, o.log)
	o.st, o.url = st, url
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "site-a", Replica: "r1", Capabilities: []string{"operations"}})
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := st.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{{DeviceID: o.dev, ObservedTime: now,
		Facts: &store.Facts{Name: "node-1", ProvisionState: "manageable"}, Conditions: []condition.Condition{{Type: condition.Enrolled, Status: condition.True,
			Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}}}}}); err != nil {
		tb.Fatal(err)
	}
	if o.cmd, err = st.SetDesiredImpairment(ctx, o.dev, store.ImpairmentQuarantined, "ops", "probe", "operator-api"); err != nil {
		tb.Fatal(err)
	}
	return o
}

package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

// otlpSpan is one span an OTLP/HTTP receiver got, with the service that sent it.
type otlpSpan struct {
	service, name         string
	traceID, id, parentID string
	kind                  tracepb.Span_SpanKind
	attrs                 map[string]string
}

// otlpReceiver is an OTLP/HTTP trace collector (POST /v1/traces with a
// protobuf ExportTraceServiceRequest) keeping every span it receives.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []otlpSpan
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var msg collectortrace.ExportTraceServiceRequest
		if err == nil && req.URL.Path == "/v1/traces" {
			err = proto.Unmarshal(body, &msg)
		}
		if err != nil || req.URL.Path != "/v1/traces" {
			t.Errorf("OTLP receiver: %s %s: %v", req.Method, req.URL.Path, err)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range msg.GetResourceSpans() {
			var service string
			for _, a := range rs.GetResource().GetAttributes() {
				if a.GetKey() == "service.name" {
					service = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					attrs := map[string]string{}
					for _, a := range s.GetAttributes() {
						attrs[a.GetKey()] = a.GetValue().GetStringValue()
					}
					r.spans = append(r.spans, otlpSpan{service: service, name: s.GetName(), kind: s.GetKind(), attrs: attrs,
						traceID: hex.EncodeToString(s.GetTraceId()), id: hex.EncodeToString(s.GetSpanId()), parentID: hex.EncodeToString(s.GetParentSpanId())})
				}
			}
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

// trace returns the spans received so far of trace id.
func (r *otlpReceiver) trace(id string) []otlpSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []otlpSpan
	for _, s := range r.spans {
		if s.traceID == id {
			out = append(out, s)
		}
	}
	return out
}

// TestQuarantineIsOneTraceSimulator runs a hub and a satellite (against the
// simulator) as processes with OTEL_EXPORTER_OTLP_ENDPOINT pointing at an
// OTLP/HTTP receiver, issues a quarantine with a W3C traceparent, and
// checks that one trace holds, parent to child: the hub's QuarantineDevice
// server span, its "deliver command" span, the satellite's "apply command"
// span and the satellite's OpenStack HTTP requests under it, among them the
// writes (PUT/DELETE) that take the trait away; the hub's "command sent"
// log line carries the trace id.
func TestQuarantineIsOneTraceSimulator(t *testing.T) {
	ctx := context.Background()
	rcv := newOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "200") // ms: export soon after a span ends
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_TRACES_SAMPLER", "")

	db := pgtest.NewDatabase(t)
	id := newIdentity(t, []string{"traced"}, map[string][]string{"ops-admin": {auth.ScopeOperationsRead, auth.ScopeOperationsWrite}})
	hubAddr, hub := startHub(t, db, id)
	_, nodes := startSimSite(t, id, hubAddr, "traced", 3)
	admin := ironlinkv1.NewFleetServiceClient(id.dialAs(t, hubAddr, "ops-admin"))
	harness.Eventually(t, 60*time.Second, func() error {
		r, err := admin.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "traced"})
		if err != nil {
			return err
		}
		if len(r.GetDevices()) != len(nodes) {
			return fmt.Errorf("%d devices at the hub, %d seeded", len(r.GetDevices()), len(nodes))
		}
		return nil
	})

	// The operator's tool is traced: its span is the remote parent.
	traceID, toolSpan := randHex(16), randHex(8)
	octx := metadata.AppendToOutgoingContext(ctx, "traceparent", "00-"+traceID+"-"+toolSpan+"-01")
	r, err := admin.QuarantineDevice(octx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: nodes[0].UUID, Reason: "e2e: traced quarantine"})
	if err != nil {
		t.Fatal(err)
	}
	waitCommand(t, admin, r.GetCommand().GetCommandId(), ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED)

	harness.Eventually(t, 30*time.Second, func() error {
		spans := rcv.trace(traceID)
		byID := map[string]otlpSpan{}
		for _, s := range spans {
			byID[s.id] = s
		}
		find := func(service, name string) (otlpSpan, error) {
			for _, s := range spans {
				if s.service == service && s.name == name {
					return s, nil
				}
			}
			names := make([]string, 0, len(spans))
			for _, s := range spans {
				names = append(names, s.service+":"+s.name)
			}
			return otlpSpan{}, fmt.Errorf("no %s span %q in trace %s (spans: %v)", service, name, traceID, names)
		}
		rpc, err := find("ironlink-hub", "ironlink.v1.FleetService/QuarantineDevice")
		if err != nil {
			return err
		}
		if rpc.parentID != toolSpan {
			return fmt.Errorf("QuarantineDevice span's parent %s, want the tool's span %s", rpc.parentID, toolSpan)
		}
		deliver, err := find("ironlink-hub", "deliver command")
		if err != nil {
			return err
		}
		if deliver.parentID != rpc.id || deliver.attrs["ironlink.command_id"] != r.GetCommand().GetCommandId() {
			return fmt.Errorf("deliver command span: parent %s (want the RPC's %s), command %q", deliver.parentID, rpc.id, deliver.attrs["ironlink.command_id"])
		}
		apply, err := find("ironlink-satellite", "apply command")
		if err != nil {
			return err
		}
		if apply.parentID != deliver.id || apply.attrs["ironlink.device_id"] != nodes[0].UUID {
			return fmt.Errorf("apply command span: parent %s (want the delivery's %s), device %q", apply.parentID, deliver.id, apply.attrs["ironlink.device_id"])
		}
		// The satellite's OpenStack requests made while applying descend from apply.
		var requests, writes []string
		for _, s := range spans {
			if s.service != "ironlink-satellite" || s.kind != tracepb.Span_SPAN_KIND_CLIENT {
				continue
			}
			under := false
			for p := s.parentID; p != "" && !under; p = byID[p].parentID {
				under = p == apply.id
				if _, ok := byID[p]; !ok {
					break
				}
			}
			if !under {
				continue
			}
			method := s.attrs["http.request.method"]
			requests = append(requests, method+" "+s.attrs["url.full"])
			if method == http.MethodPut || method == http.MethodDelete {
				writes = append(writes, method+" "+s.attrs["url.full"])
			}
		}
		if len(writes) == 0 {
			return fmt.Errorf("no OpenStack write (PUT/DELETE) under the apply span; requests under it: %v", requests)
		}
		// The hub's log line for the delivery names the trace.
		if lines := hub.Lines("command sent"); !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, traceID) }) {
			return fmt.Errorf("no hub log line \"command sent\" with trace id %s: %q", traceID, lines)
		}
		t.Logf("trace %s: %d spans; OpenStack requests under the apply span: %s", traceID, len(spans), strings.Join(requests, ", "))
		return nil
	})
}

package healthapi_test

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/grpcraw"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/test/grpctest"
)

type fixture struct {
	hub      *grpctest.Hub
	url      string
	a, b     *storetest.Site
	checkerA ironlinkv1.HealthServiceClient
	connA    *grpc.ClientConn // checkerA's connection, for raw bodies
	ops      ironlinkv1.FleetServiceClient
}

func setup(t *testing.T) *fixture {
	t.Helper()
	st, url := storetest.New(t, nil)
	f := &fixture{url: url, hub: grpctest.Start(t, st, grpctest.Options{})}
	f.a = storetest.NewSite(t, st, "site-a", 2, nil)
	f.b = storetest.NewSite(t, st, "site-b", 1, nil)
	f.connA = f.hub.HealthChecker(t, "gpu-mon-a", "site-a")
	f.checkerA = ironlinkv1.NewHealthServiceClient(f.connA)
	f.ops = ironlinkv1.NewFleetServiceClient(f.hub.Operator(t, "ops"))
	return f
}

// xidEvent is a fatal XID 79 on device id, generated at gen.
func xidEvent(id string, gen time.Time) *ironlinkv1.HealthEvent {
	return &ironlinkv1.HealthEvent{DeviceId: id, Agent: "gpu-health-monitor", ComponentClass: "GPU", CheckName: "GpuXidError",
		IsFatal: true, Message: "XID 79: GPU has fallen off the bus", RecommendedAction: ironlinkv1.HealthRecommendedAction_HEALTH_RECOMMENDED_ACTION_RESTART_BM,
		ErrorCodes: []string{"79"}, EntitiesImpacted: []*ironlinkv1.HealthEntity{{EntityType: "GPU", EntityValue: "3"}},
		GeneratedTime: timestamppb.New(gen)}
}

func (f *fixture) healthRows(t *testing.T) int {
	t.Helper()
	return pgtest.Count(t, f.url, `SELECT count(*) FROM device_conditions WHERE health IS NOT NULL`)
}

// A checker of site A reports a fatal XID: the device is FAULTED, the
// condition shows in GetDevice with its detail and in the explanation;
// the same batch again changes nothing.
func TestReportHealthThroughTheHubDoor(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	id := f.a.IDs[0]
	req := &ironlinkv1.ReportHealthRequest{Site: "site-a", Events: []*ironlinkv1.HealthEvent{xidEvent(id, time.Now().Add(-time.Second))}}
	res, err := f.checkerA.ReportHealth(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	r := res.GetResults()[0]
	if !r.GetApplied() || r.GetDeviceId() != id || r.GetConditionType() != "health.GPU/GpuXidError" || !strings.HasPrefix(r.GetEventId(), "sha256:") {
		t.Fatalf("result %v", r)
	}
	d, err := f.ops.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: id})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetDevice().GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED ||
		d.GetDevice().GetStatusReason() != "health.GPU/GpuXidError=False: FatalError (79)" {
		t.Fatalf("device %s %q", d.GetDevice().GetStatus(), d.GetDevice().GetStatusReason())
	}
	var hc *ironlinkv1.Condition
	for _, c := range d.GetDevice().GetConditions() {
		if c.GetType() == "health.GPU/GpuXidError" {
			hc = c
		}
	}
	if hc == nil || hc.GetHealth().GetAgent() != "gpu-health-monitor" || hc.GetHealth().GetEntitiesImpacted()[0].GetEntityValue() != "3" ||
		!slices.Equal(hc.GetHealth().GetErrorCodes(), []string{"79"}) {
		t.Fatalf("health condition in GetDevice: %v", hc)
	}
	ex := d.GetExplanation()
	if ex.GetRule() != 12 || len(ex.GetConditions()) != 1 || ex.GetConditions()[0].GetType() != "health.GPU/GpuXidError" {
		t.Fatalf("explanation: rule %d %q, conditions %v", ex.GetRule(), ex.GetRuleDescription(), ex.GetConditions())
	}
	hist := pgtest.Count(t, f.url, `SELECT count(*) FROM condition_history`)
	res, err = f.checkerA.ReportHealth(ctx, req)
	if err != nil || !res.GetResults()[0].GetDuplicate() {
		t.Fatalf("retry: %v %v", res, err)
	}
	if n := pgtest.Count(t, f.url, `SELECT count(*) FROM condition_history`); n != hist {
		t.Fatalf("retry wrote %d history rows", n-hist)
	}
}

// A checker bound to site A may not report for site B, neither by naming
// site B nor by naming a device of site B; a satellite (no
// device-health:create) may not report at all. Nothing is written.
func TestReportHealthIsBoundToTheCallersSite(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	now := time.Now()
	for name, tc := range map[string]struct {
		c   ironlinkv1.HealthServiceClient
		req *ironlinkv1.ReportHealthRequest
	}{
		"other site":          {f.checkerA, &ironlinkv1.ReportHealthRequest{Site: "site-b", Events: []*ironlinkv1.HealthEvent{xidEvent(f.b.IDs[0], now)}}},
		"other site's device": {f.checkerA, &ironlinkv1.ReportHealthRequest{Site: "site-a", Events: []*ironlinkv1.HealthEvent{xidEvent(f.a.IDs[0], now), xidEvent(f.b.IDs[0], now)}}},
		"satellite, no scope": {ironlinkv1.NewHealthServiceClient(f.hub.Satellite(t, "site-a")), &ironlinkv1.ReportHealthRequest{Site: "site-a", Events: []*ironlinkv1.HealthEvent{xidEvent(f.a.IDs[0], now)}}},
	} {
		_, err := tc.c.ReportHealth(ctx, tc.req)
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: %v, want PermissionDenied", name, err)
		}
	}
	if n := f.healthRows(t); n != 0 {
		t.Fatalf("refused reports wrote %d health conditions", n)
	}
}

// Bad input: InvalidArgument naming the field, NotFound for an unknown
// device; nothing written. An unknown recommended action or processing
// strategy is kept as its number; a future generated time is clamped.
func TestReportHealthBadInput(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	now := time.Now()
	id := f.a.IDs[0]
	with := func(mod func(e *ironlinkv1.HealthEvent)) *ironlinkv1.ReportHealthRequest {
		e := xidEvent(id, now)
		mod(e)
		return &ironlinkv1.ReportHealthRequest{Site: "site-a", Events: []*ironlinkv1.HealthEvent{e}}
	}
	many := &ironlinkv1.ReportHealthRequest{Site: "site-a"}
	for range 257 {
		many.Events = append(many.Events, xidEvent(id, now))
	}
	for name, tc := range map[string]struct {
		req   *ironlinkv1.ReportHealthRequest
		code  codes.Code
		field string
	}{
		"too many":       {many, codes.InvalidArgument, "events"},
		"none":           {&ironlinkv1.ReportHealthRequest{Site: "site-a"}, codes.InvalidArgument, "events"},
		"long message":   {with(func(e *ironlinkv1.HealthEvent) { e.Message = strings.Repeat("x", 1025) }), codes.InvalidArgument, "events[0].message"},
		"NUL":            {with(func(e *ironlinkv1.HealthEvent) { e.ErrorCodes = []string{"7\x009"} }), codes.InvalidArgument, "events[0].error_codes[0]"},
		"bad check":      {with(func(e *ironlinkv1.HealthEvent) { e.CheckName = "Gpu Xid" }), codes.InvalidArgument, "events[0].check_name"},
		"no time":        {with(func(e *ironlinkv1.HealthEvent) { e.GeneratedTime = nil }), codes.InvalidArgument, "events[0].generated_time"},
		"two devices":    {with(func(e *ironlinkv1.HealthEvent) { e.NodeName = "gpu-01" }), codes.InvalidArgument, "events[0].device_id"},
		"bad uuid":       {with(func(e *ironlinkv1.HealthEvent) { e.DeviceId = "NOT-A-UUID" }), codes.InvalidArgument, "events[0].device_id"},
		"33 codes":       {with(func(e *ironlinkv1.HealthEvent) { e.ErrorCodes = make([]string, 33) }), codes.InvalidArgument, "events[0].error_codes"},
		"33 entities":    {with(func(e *ironlinkv1.HealthEvent) { e.EntitiesImpacted = manyEntities(33) }), codes.InvalidArgument, "events[0].entities_impacted"},
		"33 metadata":    {with(func(e *ironlinkv1.HealthEvent) { e.Metadata = manyMetadata(33) }), codes.InvalidArgument, "events[0].metadata"},
		"long value":     {with(func(e *ironlinkv1.HealthEvent) { e.Metadata = map[string]string{"gpu": strings.Repeat("v", 257)} }), codes.InvalidArgument, `events[0].metadata["gpu"]`},
		"bidi override":  {with(func(e *ironlinkv1.HealthEvent) { e.Message = "GPU 3 \u202efine\u202c" }), codes.InvalidArgument, "events[0].message"},
		"bidi in code":   {with(func(e *ironlinkv1.HealthEvent) { e.ErrorCodes = []string{"79\u2066"} }), codes.InvalidArgument, "events[0].error_codes[0]"},
		"dots class":     {with(func(e *ironlinkv1.HealthEvent) { e.ComponentClass = "..." }), codes.InvalidArgument, "events[0].component_class"},
		"dash check":     {with(func(e *ironlinkv1.HealthEvent) { e.CheckName = "-x" }), codes.InvalidArgument, "events[0].check_name"},
		"1970":           {with(func(e *ironlinkv1.HealthEvent) { e.GeneratedTime = timestamppb.New(time.Unix(1, 0)) }), codes.InvalidArgument, "events[0].generated_time"},
		"8 days old":     {with(func(e *ironlinkv1.HealthEvent) { e.GeneratedTime = timestamppb.New(now.Add(-8 * 24 * time.Hour)) }), codes.InvalidArgument, "events[0].generated_time"},
		"unknown device": {with(func(e *ironlinkv1.HealthEvent) { e.DeviceId = "0b8e6c1e-0000-4000-8000-000000000000" }), codes.NotFound, ""},
		"unknown node":   {with(func(e *ironlinkv1.HealthEvent) { e.DeviceId, e.NodeName = "", "10.0.15.233" }), codes.NotFound, ""},
	} {
		_, err := f.checkerA.ReportHealth(ctx, tc.req)
		if status.Code(err) != tc.code || (tc.field != "" && !slices.Contains(grpcerr.Fields(err), tc.field)) {
			t.Errorf("%s: %v (fields %v), want %s on %q", name, err, grpcerr.Fields(err), tc.code, tc.field)
		}
	}
	if n := f.healthRows(t); n != 0 {
		t.Fatalf("refused reports wrote %d health conditions", n)
	}
	_, err := f.checkerA.ReportHealth(ctx, with(func(e *ironlinkv1.HealthEvent) { e.EntitiesImpacted = manyEntities(33) }))
	if got, want := status.Convert(err).Message(), "events[0].entities_impacted has 33 items, at most 32"; got != want {
		t.Errorf("33 impacted entities: %q, want %q", got, want)
	}
	_, err = f.checkerA.ReportHealth(ctx, with(func(e *ironlinkv1.HealthEvent) { e.Message = "ok\u202e" }))
	if got, want := status.Convert(err).Message(), "events[0].message contains bidirectional control character U+202E at byte 2"; got != want {
		t.Errorf("bidi override: %q, want %q", got, want)
	}

	// A device id in any form GetDevice takes (upper case, no hyphens)
	// names the same device, stored under its canonical id; the event is
	// the same event as with the canonical id (a retry is a duplicate).
	upper := strings.ToUpper(strings.ReplaceAll(id, "-", ""))
	if _, err := f.ops.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: upper}); err != nil {
		t.Fatalf("GetDevice %s: %v", upper, err)
	}
	warmth := func(e *ironlinkv1.HealthEvent) {
		e.IsFatal, e.CheckName, e.ErrorCodes, e.GeneratedTime = false, "GpuThermalWatch", []string{"thermal"}, timestamppb.New(now.Add(-time.Minute))
	}
	for _, dev := range []string{upper, id} {
		r, err := f.checkerA.ReportHealth(ctx, with(func(e *ironlinkv1.HealthEvent) { warmth(e); e.DeviceId = dev }))
		if err != nil {
			t.Fatalf("device id %s: %v, want accepted as GetDevice takes it", dev, err)
		}
		if got := r.GetResults()[0]; got.GetDeviceId() != id || (dev == id) != got.GetDuplicate() {
			t.Errorf("device id %s: result %v, want device %s, a duplicate the second time (one event)", dev, got, id)
		}
	}
	if n := f.healthRows(t); n != 1 {
		t.Fatalf("a non-canonical device id wrote %d health conditions, want 1", n)
	}

	res, err := f.checkerA.ReportHealth(ctx, with(func(e *ironlinkv1.HealthEvent) {
		e.RecommendedAction, e.ProcessingStrategy = 77, 9
		e.GeneratedTime = timestamppb.New(now.Add(time.Hour))
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !res.GetResults()[0].GetClamped() {
		t.Error("a generated time an hour ahead was not clamped")
	}
	d, err := f.ops.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: id})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range d.GetDevice().GetConditions() {
		if h := c.GetHealth(); h != nil && h.GetCheckName() == "GpuXidError" {
			if h.GetRecommendedAction() != 77 || h.GetProcessingStrategy() != 9 || h.GetGeneratedTime().AsTime().After(time.Now()) {
				t.Errorf("kept numbers / clamped time: %v", h)
			}
		}
	}
	if d.GetDevice().GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED {
		t.Errorf("an unknown processing strategy acts: status %s", d.GetDevice().GetStatus())
	}
}

// A non-fatal unhealthy event is a warning: the status stays, the site
// summary counts it, ListDevices filters on it; a store-only fatal one
// changes nothing and is no warning.
func TestReportHealthWarnings(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	now := time.Now()
	warn := xidEvent(f.a.IDs[0], now)
	warn.IsFatal, warn.CheckName, warn.ErrorCodes = false, "GpuThermalWatch", []string{"thermal"}
	storeOnly := xidEvent(f.a.IDs[1], now)
	storeOnly.ProcessingStrategy = ironlinkv1.HealthProcessingStrategy_HEALTH_PROCESSING_STRATEGY_STORE_ONLY
	if _, err := f.checkerA.ReportHealth(ctx, &ironlinkv1.ReportHealthRequest{Site: "site-a", Events: []*ironlinkv1.HealthEvent{warn, storeOnly}}); err != nil {
		t.Fatal(err)
	}
	list, err := f.ops.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{HealthWarning: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetDevices()) != 1 || list.GetDevices()[0].GetDeviceId() != f.a.IDs[0] ||
		list.GetDevices()[0].GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE {
		t.Fatalf("health_warning filter: %v", list.GetDevices())
	}
	all, err := f.ops.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "site-a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range all.GetDevices() {
		if d.GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE {
			t.Errorf("device %s: %s, want AVAILABLE (warning and store-only change no status)", d.GetDeviceId(), d.GetStatus())
		}
	}
	sites, err := f.ops.ListSites(ctx, &ironlinkv1.ListSitesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sites.GetSites() {
		want := map[string]int32{"site-a": 1, "site-b": 0}[s.GetName()]
		if s.GetHealthWarningCount() != want {
			t.Errorf("site %s: health_warning_count %d, want %d", s.GetName(), s.GetHealthWarningCount(), want)
		}
	}
}

// badStrings are, per string field of a health event, a change that puts a
// NUL byte in it and one that makes it one byte over its limit (the
// hub's door and the satellite's refuse both, test/faults).
func badStrings() map[string][2]func(e *ironlinkv1.HealthEvent) {
	long := func(n int) string { return strings.Repeat("x", n+1) }
	return map[string][2]func(e *ironlinkv1.HealthEvent){
		"event_id":        {func(e *ironlinkv1.HealthEvent) { e.EventId = "ev\x001" }, func(e *ironlinkv1.HealthEvent) { e.EventId = long(128) }},
		"device_name":     {func(e *ironlinkv1.HealthEvent) { e.DeviceId, e.DeviceName = "", "gpu\x0001" }, func(e *ironlinkv1.HealthEvent) { e.DeviceId, e.DeviceName = "", long(255) }},
		"node_name":       {func(e *ironlinkv1.HealthEvent) { e.DeviceId, e.NodeName = "", "10.0.\x0015.233" }, func(e *ironlinkv1.HealthEvent) { e.DeviceId, e.NodeName = "", long(255) }},
		"device_id":       {func(e *ironlinkv1.HealthEvent) { e.DeviceId = e.DeviceId[:8] + "\x00" + e.DeviceId[9:] }, func(e *ironlinkv1.HealthEvent) { e.DeviceId = long(255) }},
		"agent":           {func(e *ironlinkv1.HealthEvent) { e.Agent = "gpu\x00mon" }, func(e *ironlinkv1.HealthEvent) { e.Agent = long(64) }},
		"component_class": {func(e *ironlinkv1.HealthEvent) { e.ComponentClass = "G\x00PU" }, func(e *ironlinkv1.HealthEvent) { e.ComponentClass = long(64) }},
		"check_name":      {func(e *ironlinkv1.HealthEvent) { e.CheckName = "Xid\x00" }, func(e *ironlinkv1.HealthEvent) { e.CheckName = long(64) }},
		"message":         {func(e *ironlinkv1.HealthEvent) { e.Message = "XID\x0079" }, func(e *ironlinkv1.HealthEvent) { e.Message = long(1024) }},
		"error_codes[1]":  {func(e *ironlinkv1.HealthEvent) { e.ErrorCodes = []string{"79", "4\x008"} }, func(e *ironlinkv1.HealthEvent) { e.ErrorCodes = []string{"79", long(64)} }},
		"entities_impacted[0].entity_type": {func(e *ironlinkv1.HealthEvent) { e.EntitiesImpacted[0].EntityType = "G\x00PU" },
			func(e *ironlinkv1.HealthEvent) { e.EntitiesImpacted[0].EntityType = long(64) }},
		"entities_impacted[0].entity_value": {func(e *ironlinkv1.HealthEvent) { e.EntitiesImpacted[0].EntityValue = "GPU-\x00" },
			func(e *ironlinkv1.HealthEvent) { e.EntitiesImpacted[0].EntityValue = long(256) }},
		"metadata": {func(e *ironlinkv1.HealthEvent) { e.Metadata = map[string]string{"ok": "1", "se\x00rial": "x"} },
			func(e *ironlinkv1.HealthEvent) { e.Metadata = map[string]string{long(64): "x"} }},
		`metadata["serial"]`: {func(e *ironlinkv1.HealthEvent) { e.Metadata = map[string]string{"serial": "12\x0034"} },
			func(e *ironlinkv1.HealthEvent) { e.Metadata = map[string]string{"serial": long(256)} }},
	}
}

// Every string field of an event, NUL or one byte over its limit, in the
// second event of a batch: InvalidArgument naming events[1].<field>, and
// nothing of the batch (not its good first event) is written. Strings
// that are not UTF-8 (sent raw: a Go client cannot marshal them) are
// refused the same way.
func TestReportHealthRefusesBadStringsInEveryField(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	now := time.Now()
	for field, mods := range badStrings() {
		for k, mod := range mods {
			bad := xidEvent(f.a.IDs[1], now)
			mod(bad)
			_, err := f.checkerA.ReportHealth(ctx, &ironlinkv1.ReportHealthRequest{Site: "site-a",
				Events: []*ironlinkv1.HealthEvent{xidEvent(f.a.IDs[0], now), bad}})
			want := "events[1]." + field
			if status.Code(err) != codes.InvalidArgument || !slices.Contains(grpcerr.Fields(err), want) {
				t.Errorf("%s (%s): %v (fields %v), want InvalidArgument on %q", field, []string{"NUL", "too long"}[k], err, grpcerr.Fields(err), want)
			}
		}
	}
	good := xidEvent(f.a.IDs[1], now)
	good.Metadata = map[string]string{"serial": "1234"}
	body, err := proto.Marshal(&ironlinkv1.ReportHealthRequest{Site: "site-a", Events: []*ironlinkv1.HealthEvent{xidEvent(f.a.IDs[0], now), good}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to, field string }{
		{"gpu-health-monitor", "gpu-health-monit\xffr", "events[0].agent"},
		{"GpuXidError", "GpuXidErr\xc3r", "events[0].check_name"},
		{"fallen", "f\xe2llen", "events[0].message"},
		{"1234", "12\xfe4", `events[1].metadata`},
		{"site-a", "sit\xff-a", "site"},
	} {
		raw := bytes.Replace(body, []byte(c.from), []byte(c.to), 1)
		err := f.connA.Invoke(ctx, "/ironlink.v1.HealthService/ReportHealth", &raw, new(ironlinkv1.ReportHealthResponse), grpc.ForceCodecV2(grpcraw.Codec{}))
		if status.Code(err) != codes.InvalidArgument || !slices.ContainsFunc(grpcerr.Fields(err), func(s string) bool { return strings.HasPrefix(s, c.field) }) {
			t.Errorf("invalid UTF-8 in %s: %v (fields %v), want InvalidArgument naming it", c.field, err, grpcerr.Fields(err))
		}
	}
	if n := f.healthRows(t); n != 0 {
		t.Fatalf("refused reports wrote %d health conditions", n)
	}
	if n := pgtest.Count(t, f.url, `SELECT count(*) FROM health_event_ids`); n != 0 {
		t.Fatalf("refused reports claimed %d event ids", n)
	}
}

// manyEntities is n impacted GPUs.
func manyEntities(n int) []*ironlinkv1.HealthEntity {
	var out []*ironlinkv1.HealthEntity
	for i := range n {
		out = append(out, &ironlinkv1.HealthEntity{EntityType: "GPU", EntityValue: strconv.Itoa(i)})
	}
	return out
}

// manyMetadata is n metadata entries.
func manyMetadata(n int) map[string]string {
	out := map[string]string{}
	for i := range n {
		out["k"+strconv.Itoa(i)] = "v"
	}
	return out
}

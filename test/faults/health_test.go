package faults

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/ironlink/ironlink/gen/datamodels"
	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/grpcraw"
	"github.com/ironlink/ironlink/internal/promtest"
	"github.com/ironlink/ironlink/internal/tcpproxy"
	"github.com/ironlink/ironlink/test/harness"
)

// healthSite starts a hub (fastHub plus hubExtra) and a site of n simulated
// nodes whose satellite serves the local health door; it returns the
// door's client once every node is a device.
func healthSite(t *testing.T, name string, n int, hubExtra ...string) (*harness.Hub, string, *site, datamodels.PlatformConnectorClient) {
	hub, db, s, door, _ := healthSiteMetrics(t, name, n, hubExtra...)
	return hub, db, s, door
}

// healthSiteMetrics is healthSite whose satellite also serves its metrics
// at the returned URL.
func healthSiteMetrics(t *testing.T, name string, n int, hubExtra ...string) (*harness.Hub, string, *site, datamodels.PlatformConnectorClient, string) {
	hs := startHealthSite(t, name, n, healthSiteOptions{hubExtra: hubExtra})
	return hs.hub, hs.db, hs.site, hs.door, hs.metrics
}

// healthSiteOptions are startHealthSite's: the hub's and the satellite's
// extra flags, and whether the satellite reaches the hub through a
// tcpproxy (to cut its link).
type healthSiteOptions struct {
	hubExtra, satExtra []string
	proxy              bool
}

// healthSiteParts is what startHealthSite started.
type healthSiteParts struct {
	hub     *harness.Hub
	db      string
	site    *site
	door    datamodels.PlatformConnectorClient
	metrics string          // the satellite's /metrics URL
	proxy   *tcpproxy.Proxy // between satellite and hub, with o.proxy
}

// startHealthSite is healthSiteMetrics with options.
func startHealthSite(t *testing.T, name string, n int, o healthSiteOptions) healthSiteParts {
	t.Helper()
	db, pool := newDatabase(t)
	hub := startHub(t, db, "hub-a", o.hubExtra...)
	s := newSite(t, name, n)
	sock := filepath.Join(t.TempDir(), "health.sock")
	s.healthSock = sock
	metrics := harness.FreeAddr(t)
	out := healthSiteParts{hub: hub, db: db, site: s, metrics: "http://" + metrics + "/metrics"}
	hubAddr := hub.Addr
	if o.proxy {
		out.proxy = newProxy(t, hub.Addr)
		hubAddr = out.proxy.Addr()
	}
	s.startSatellite(t, "", hubAddr, append([]string{"--health-socket", sock, "--health-wait", "60s", "--metrics-addr", metrics}, o.satExtra...)...)
	waitDevices(t, pool, s, 30*time.Second)
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	out.door = datamodels.NewPlatformConnectorClient(cc)
	return out
}

// xid is an NVSentinel GPU XID event for node, generated now.
func xid(node, code string, fatal bool) *datamodels.HealthEvent {
	return &datamodels.HealthEvent{Agent: "gpu-health-monitor", ComponentClass: "GPU", CheckName: "GpuXidError",
		IsFatal: fatal, Message: "XID " + code, RecommendedAction: datamodels.RecommendedAction_RESTART_BM,
		ErrorCode: []string{code}, EntitiesImpacted: []*datamodels.Entity{{EntityType: "GPU", EntityValue: "3"}},
		GeneratedTimestamp: timestamppb.Now(), NodeName: node}
}

// report sends events through the door.
func report(ctx context.Context, door datamodels.PlatformConnectorClient, evs ...*datamodels.HealthEvent) error {
	_, err := door.HealthEventOccurredV1(ctx, &datamodels.HealthEvents{Version: 1, Events: evs})
	return err
}

// device is GetDevice of id.
func device(t *testing.T, fc ironlinkv1.FleetServiceClient, id string) *ironlinkv1.Device {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := fc.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: id})
	if err != nil {
		t.Fatalf("GetDevice %s: %v", id, err)
	}
	return r.GetDevice()
}

// healthConditions are the device's health condition types.
func healthConditions(d *ironlinkv1.Device) []string {
	var out []string
	for _, c := range d.GetConditions() {
		if strings.HasPrefix(c.GetType(), "health.") {
			out = append(out, c.GetType())
		}
	}
	return out
}

// TestHealthThroughSatelliteDuringOutage sends an NVSentinel XID 79 event
// through the satellite's local door while the hub is down: the call waits,
// the hub comes back at the same address, the link returns, the event is
// committed once and the device turns FAULTED naming the check; the
// door's metrics count 2 accepted, 1 spooled, 2 committed.
func TestHealthThroughSatelliteDuringOutage(t *testing.T) {
	hub, db, s, door, metrics := healthSiteMetrics(t, "health-out", 4)
	node := s.sim.Nodes()[1]
	fc := harness.Fleet(t, hub.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// With the link up: a non-fatal warning is committed before the call returns.
	if err := report(ctx, door, xid(node.Name, "63", false)); err != nil {
		t.Fatalf("report with the link up: %v", err)
	}
	if got := healthConditions(device(t, fc, node.UUID)); !slices.Contains(got, "health.GPU/GpuXidError") {
		t.Fatalf("after the door answered, health conditions %v, want health.GPU/GpuXidError", got)
	}

	hub.Stop(5 * time.Second)
	done := make(chan error, 1)
	go func() { done <- report(ctx, door, xid(node.Name, "79", true)) }()
	select {
	case err := <-done:
		t.Fatalf("the door answered (%v) while the hub was down: it must wait for the commit", err)
	case <-time.After(2 * time.Second):
	}
	hub = harness.StartHubAt(t, bins, hub.Addr, db, "hub-a", fastHub()...)
	if err := <-done; err != nil {
		t.Fatalf("report sent during the outage: %v", err)
	}
	fc = harness.Fleet(t, hub.Addr)
	d := device(t, fc, node.UUID)
	if d.GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED || !strings.Contains(d.GetStatusReason(), "GpuXidError") {
		t.Fatalf("after the outage: status %v (%q), want FAULTED naming GpuXidError", d.GetStatus(), d.GetStatusReason())
	}
	pool := harness.Pool(t, db)
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM health_event_ids`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("health event ids stored: %d, want 2 (each event committed once)", n)
	}
	if !strings.Contains(s.sat.Output(), "health report sent") {
		t.Errorf("satellite never logged a health report sent")
	}
	page := promtest.Scrape(t, metrics)
	for outcome, want := range map[string]float64{"accepted": 2, "committed": 2, "spooled": 1, "refused": 0, "dropped": 0} {
		if v, _ := page.Value("ironlink_satellite_health_events_total", "outcome", outcome); v != want {
			t.Errorf("ironlink_satellite_health_events_total{outcome=%q} = %g, want %g", outcome, v, want)
		}
	}
	if v, _ := page.Value("ironlink_satellite_health_spool_events"); v != 0 {
		t.Errorf("spool holds %g events after the hub answered, want 0", v)
	}
}

// TestHealthDoorRefusesBadInput sends what the door must refuse, checks
// the status and the field it names (every string field: NUL, over its
// limit, and not UTF-8, sent raw; a bidirectional override; a class
// "..."; a time of 1970), that the door refused the bad strings
// itself (nothing spooled) and that nothing was written; an
// unknown recommended action is kept, not refused.
func TestHealthDoorRefusesBadInput(t *testing.T) {
	hub, _, s, door, metrics := healthSiteMetrics(t, "health-bad", 3)
	node := s.sim.Nodes()[0]
	fc := harness.Fleet(t, hub.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nul := xid(node.Name, "79", true)
	nul.Message = "bad\x00message"
	noTime := xid(node.Name, "79", true)
	noTime.GeneratedTimestamp = nil
	badName := xid(node.Name, "79", true)
	badName.CheckName = "Gpu Xid"
	bidiMsg := xid(node.Name, "79", true)
	bidiMsg.Message = "GPU 3 \u202eflesti\u202c XID 79"
	dots := xid(node.Name, "79", true)
	dots.ComponentClass = "..."
	epoch := xid(node.Name, "79", true)
	epoch.GeneratedTimestamp = timestamppb.New(time.Unix(0, 1))
	many := make([]*datamodels.HealthEvent, 257)
	for i := range many {
		many[i] = xid(node.Name, "48", true)
	}
	tooManyCodes := xid(node.Name, "79", true)
	for i := range 33 {
		tooManyCodes.ErrorCode = append(tooManyCodes.ErrorCode, fmt.Sprint(i))
	}
	for _, c := range []struct {
		name  string
		evs   []*datamodels.HealthEvent
		code  codes.Code
		field string
	}{
		{"empty batch", nil, codes.InvalidArgument, "events"},
		{"257 events", many, codes.InvalidArgument, "events"},
		{"NUL in message", []*datamodels.HealthEvent{xid(node.Name, "48", false), nul}, codes.InvalidArgument, "events[1].message"},
		{"no generated time", []*datamodels.HealthEvent{noTime}, codes.InvalidArgument, "events[0].generated_time"},
		{"invalid check name", []*datamodels.HealthEvent{badName}, codes.InvalidArgument, "events[0].check_name"},
		{"no node name", []*datamodels.HealthEvent{xid("", "79", true)}, codes.InvalidArgument, "events[0].node_name"},
		{"34 error codes (the hub's limit: 32)", []*datamodels.HealthEvent{tooManyCodes}, codes.InvalidArgument, "events[0].error_codes has 34 items, at most 32"},
		{"unknown node (the hub's answer)", []*datamodels.HealthEvent{xid("no-such-node", "79", true)}, codes.NotFound, "no-such-node"},
	} {
		err := report(ctx, door, c.evs...)
		if st := status.Convert(err); st.Code() != c.code || !strings.Contains(st.Message(), c.field) {
			t.Errorf("%s: %v, want %v naming %s", c.name, err, c.code, c.field)
		}
	}
	// Bad strings are the door's own refusals: nothing is accepted into
	// the spool, nothing reaches the hub.
	accepted := func() float64 {
		v, _ := promtest.Scrape(t, metrics).Value("ironlink_satellite_health_events_total", "outcome", "accepted")
		return v
	}
	before := accepted()
	for field, mods := range badDoorStrings() {
		for k, mod := range mods {
			bad := xid(node.Name, "79", true)
			mod(bad)
			err := report(ctx, door, xid(node.Name, "48", false), bad)
			want := "events[1]." + field + " "
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), want) {
				t.Errorf("%s (%s): %v, want InvalidArgument naming %s", field, []string{"NUL", "too long"}[k], err, want)
			}
		}
	}
	for _, c := range []struct {
		name  string
		ev    *datamodels.HealthEvent
		field string
	}{
		{"bidi override in message", bidiMsg, "events[1].message contains bidirectional control character U+202E at byte 6"},
		{"component class ...", dots, "events[1].component_class must be 1 to 64"},
		{"generated in 1970", epoch, "events[1].generated_time is 1970-01-01T00:00:00Z, more than 168h0m0s before the door's clock"},
	} {
		err := report(ctx, door, xid(node.Name, "48", false), c.ev)
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), c.field) {
			t.Errorf("%s: %v, want InvalidArgument %q…", c.name, err, c.field)
		}
	}
	if after := accepted(); after != before {
		t.Errorf("the door accepted %g events of batches with bad strings, want 0 (refused before the spool)", after-before)
	}
	// Strings that are not UTF-8 cannot be sent by a Go client: raw
	// bodies, a good batch with one string's bytes replaced (same length).
	raw, err := grpc.NewClient("unix://"+s.healthSock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(grpcraw.Codec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	good, err := proto.Marshal(&datamodels.HealthEvents{Version: 1, Events: []*datamodels.HealthEvent{xid(node.Name, "48", false), xid(node.Name, "79", true)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, from, to, field string }{
		{"invalid UTF-8 in nodeName", node.Name, "\xff" + node.Name[1:], "events[0].node_name"},
		{"invalid UTF-8 in message", "XID 79", "XID \xc37", "events[1].message"},
		{"invalid UTF-8 in agent", "gpu-health-monitor", "gpu-health-monit\xffr", "events[0].agent"},
		{"invalid UTF-8 in an error code", "\x0248", "\x024\xff", "events[0].error_codes[0]"},
	} {
		body := bytes.Replace(good, []byte(c.from), []byte(c.to), 1)
		err := raw.Invoke(ctx, "/datamodels.PlatformConnector/HealthEventOccurredV1", &body, new(emptypb.Empty))
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), c.field+" ") {
			t.Errorf("%s: %v, want InvalidArgument naming %s", c.name, err, c.field)
		}
	}
	if got := healthConditions(device(t, fc, node.UUID)); len(got) != 0 {
		t.Fatalf("refused reports wrote health conditions %v", got)
	}
	unknown := xid(node.Name, "94", false)
	unknown.RecommendedAction = 77 // a value NVSentinel may add later
	unknown.ProcessingStrategy = 9
	if err := report(ctx, door, unknown); err != nil {
		t.Fatalf("unknown recommended action and processing strategy: %v, want kept", err)
	}
	if got := healthConditions(device(t, fc, node.UUID)); len(got) != 1 {
		t.Fatalf("health conditions %v after the accepted report, want one", got)
	}
	// A generated time an hour ahead is kept, clamped to the hub's clock
	// and counted on the hub's /metrics.
	ahead := xid(node.Name, "94", false)
	ahead.GeneratedTimestamp = timestamppb.New(time.Now().Add(time.Hour))
	if err := report(ctx, door, ahead); err != nil {
		t.Fatalf("a generated time an hour ahead: %v, want clamped", err)
	}
	for _, c := range device(t, fc, node.UUID).GetConditions() {
		if h := c.GetHealth(); h != nil && h.GetGeneratedTime().AsTime().After(time.Now()) {
			t.Errorf("%s generated at %s, after the hub's clock: not clamped", c.GetType(), h.GetGeneratedTime().AsTime())
		}
	}
	if v, _ := promtest.Scrape(t, "http://"+hub.AdminAddr+"/metrics").Value("ironlink_hub_health_events_clamped_total"); v != 1 {
		t.Errorf("ironlink_hub_health_events_clamped_total = %g, want 1", v)
	}
}

// badDoorStrings are, per string field of an NVSentinel event (named as
// the door names it, ironlink's field names), a change that puts a NUL
// byte in it and one that makes it one byte over the hub's limit.
func badDoorStrings() map[string][2]func(e *datamodels.HealthEvent) {
	long := func(n int) string { return strings.Repeat("x", n+1) }
	type ev = datamodels.HealthEvent
	return map[string][2]func(e *ev){
		"node_name":       {func(e *ev) { e.NodeName += "\x00" }, func(e *ev) { e.NodeName = long(255) }},
		"agent":           {func(e *ev) { e.Agent = "gpu\x00mon" }, func(e *ev) { e.Agent = long(64) }},
		"component_class": {func(e *ev) { e.ComponentClass = "G\x00PU" }, func(e *ev) { e.ComponentClass = long(64) }},
		"check_name":      {func(e *ev) { e.CheckName = "Xid\x00" }, func(e *ev) { e.CheckName = long(64) }},
		"message":         {func(e *ev) { e.Message = "XID\x0079" }, func(e *ev) { e.Message = long(1024) }},
		"error_codes[1]":  {func(e *ev) { e.ErrorCode = []string{"79", "4\x008"} }, func(e *ev) { e.ErrorCode = []string{"79", long(64)} }},
		"entities_impacted[0].entity_type": {func(e *ev) { e.EntitiesImpacted[0].EntityType = "G\x00PU" },
			func(e *ev) { e.EntitiesImpacted[0].EntityType = long(64) }},
		"entities_impacted[0].entity_value": {func(e *ev) { e.EntitiesImpacted[0].EntityValue = "GPU-\x00" },
			func(e *ev) { e.EntitiesImpacted[0].EntityValue = long(256) }},
		"metadata":           {func(e *ev) { e.Metadata = map[string]string{"ok": "1", "se\x00rial": "x"} }, func(e *ev) { e.Metadata = map[string]string{long(64): "x"} }},
		`metadata["serial"]`: {func(e *ev) { e.Metadata = map[string]string{"serial": "12\x0034"} }, func(e *ev) { e.Metadata = map[string]string{"serial": long(256)} }},
	}
}

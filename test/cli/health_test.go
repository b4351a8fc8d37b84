package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/healthsim"
	"github.com/ironlink/ironlink/internal/tlsutil"
	"github.com/ironlink/ironlink/test/harness"
)

// TestHealthConditionEverywhere: a fatal XID 79 event sent through the
// satellite's local door (real hub and satellite processes, real
// PostgreSQL) shows wherever conditions show: GetDevice and its
// explanation and status history, ListDevices (the FAULTED filter and
// the status reason; a list carries no conditions), GetDevice as_of (absent
// before the report, present after), the change feed (WatchFleet: the
// FAULTED change names the check), the CLI (describe device, describe
// device --as-of, get devices -o wide, events), and the web device page
// with its timeline lane. A thermal warning on another device leaves its
// status, is counted in the site summary and filtered by ListDevices
// health_warning and get devices --health-warning.
func TestHealthConditionEverywhere(t *testing.T) {
	f := newFleet(t, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var target *ironlinkv1.Device
	harness.Eventually(t, 60*time.Second, func() error {
		r, err := f.api.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: site,
			Statuses: []ironlinkv1.OperationalStatus{ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE}})
		if err != nil || len(r.GetDevices()) == 0 {
			return fmt.Errorf("no AVAILABLE device at the hub yet (%v)", err)
		}
		target = r.GetDevices()[0]
		return nil
	})
	door, err := healthsim.Dial(f.healthSock)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = door.Close() }()
	xid79, err := healthsim.Lookup("xid79")
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	time.Sleep(50 * time.Millisecond) // the report commits after before, whatever the clocks' resolution
	if err := door.Send(ctx, xid79.Event(target.GetName(), 3, time.Now(), false)); err != nil {
		t.Fatalf("door: %v", err)
	}
	const typ = "health.GPU/SysLogsXIDError"
	hasHealth := func(cs []*ironlinkv1.Condition) *ironlinkv1.Condition {
		for _, c := range cs {
			if c.GetType() == typ {
				return c
			}
		}
		return nil
	}

	// The API: the device, its explanation and history, the list.
	d, err := f.api.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: target.GetDeviceId()})
	if err != nil {
		t.Fatal(err)
	}
	c := hasHealth(d.GetDevice().GetConditions())
	if c == nil || c.GetStatus() != ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE || c.GetReason() != "FatalError" ||
		c.GetHealth().GetAgent() == "" || len(c.GetHealth().GetErrorCodes()) != 1 || c.GetHealth().GetErrorCodes()[0] != "79" ||
		len(c.GetHealth().GetEntitiesImpacted()) == 0 {
		t.Fatalf("GetDevice: %s = %v, want False/FatalError with agent, code 79 and the GPU", typ, c)
	}
	if d.GetDevice().GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED {
		t.Fatalf("status %v, want FAULTED", d.GetDevice().GetStatus())
	}
	if e := d.GetExplanation(); hasHealth(e.GetConditions()) == nil || !strings.Contains(e.GetReason(), "SysLogsXIDError") {
		t.Errorf("explanation %q (conditions %v) does not name %s", e.GetReason(), e.GetConditions(), typ)
	}
	if h := d.GetStatusHistory(); len(h) == 0 || h[0].GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED || !strings.Contains(h[0].GetReason(), "SysLogsXIDError") {
		t.Errorf("status history %v: the newest entry is not FAULTED naming SysLogsXIDError", h)
	}
	list, err := f.api.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: site,
		Statuses: []ironlinkv1.OperationalStatus{ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED}})
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, ld := range list.GetDevices() { // a list carries no conditions: the reason names the check
		listed = listed || (ld.GetDeviceId() == target.GetDeviceId() && strings.Contains(ld.GetStatusReason(), "SysLogsXIDError"))
	}
	if !listed {
		t.Errorf("ListDevices FAULTED does not list %s with a reason naming SysLogsXIDError: %v", target.GetName(), list.GetDevices())
	}

	// as_of: not there before the report, there after it.
	then, err := f.api.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: target.GetDeviceId(), AsOf: timestamppb.New(before)})
	if err != nil {
		t.Fatal(err)
	}
	if hasHealth(then.GetDevice().GetConditions()) != nil || then.GetDevice().GetStatus() == ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED {
		t.Errorf("as_of before the report: %v with %s, want neither", then.GetDevice().GetStatus(), typ)
	}
	now, err := f.api.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: target.GetDeviceId(), AsOf: timestamppb.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if hasHealth(now.GetDevice().GetConditions()) == nil {
		t.Errorf("as_of now lacks %s: %v", typ, now.GetDevice().GetConditions())
	}

	// The change feed.
	feedCtx, feedCancel := context.WithTimeout(ctx, 30*time.Second)
	defer feedCancel()
	w, err := f.api.WatchFleet(feedCtx, &ironlinkv1.WatchFleetRequest{Site: site, FromOldest: true,
		Kinds: []ironlinkv1.FleetEventKind{ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_DEVICE_STATUS}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := w.Recv()
		if err != nil {
			t.Errorf("the change feed never sent %s turning FAULTED naming SysLogsXIDError: %v", target.GetName(), err)
			break
		}
		if ds := m.GetEvent().GetDeviceStatus(); ds.GetDeviceId() == target.GetDeviceId() &&
			ds.GetStatus() == ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED && strings.Contains(ds.GetReason(), "SysLogsXIDError") {
			break
		}
	}
	feedCancel()

	// The CLI.
	name := site + "/" + target.GetName()
	f.expect(f.run("describe", "device", name), 0, []string{typ, "FatalError", "SysLogsXIDError"}, nil)
	f.expect(f.run("describe", "device", name, "--as-of", before.UTC().Format(time.RFC3339Nano)), 0, nil, nil)
	if r := f.run("describe", "device", name, "--as-of", before.UTC().Format(time.RFC3339Nano)); strings.Contains(r.stdout, typ) {
		t.Errorf("describe device --as-of before the report shows %s:\n%s", typ, r.stdout)
	}
	f.expect(f.run("get", "devices", name, "-o", "wide"), 0, []string{"FAULTED", "SysLogsXIDError"}, nil)
	f.expect(f.run("events", name, "--since", "10m", "-o", "wide"), 0, []string{"FAULTED", "SysLogsXIDError"}, nil)

	// A warning (thermal, not fatal) on another device: the status stays,
	// the site summary counts it, the list filters on it (API and CLI).
	var warned *ironlinkv1.Device
	for _, ld := range list0(ctx, t, f) {
		if ld.GetDeviceId() != target.GetDeviceId() {
			warned = ld
			break
		}
	}
	thermal, err := healthsim.Lookup("thermal")
	if err != nil {
		t.Fatal(err)
	}
	if err := door.Send(ctx, thermal.Event(warned.GetName(), 1, time.Now(), false)); err != nil {
		t.Fatalf("door: %v", err)
	}
	if s := getStatus(ctx, t, f, warned.GetDeviceId()); s != warned.GetStatus() {
		t.Errorf("a warning changed %s's status %v → %v", warned.GetName(), warned.GetStatus(), s)
	}
	w1, err := f.api.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: site, HealthWarning: true})
	if err != nil || len(w1.GetDevices()) != 1 || w1.GetDevices()[0].GetDeviceId() != warned.GetDeviceId() {
		t.Errorf("ListDevices health_warning: %v %v, want %s only", w1.GetDevices(), err, warned.GetName())
	}
	sites, err := f.api.ListSites(ctx, &ironlinkv1.ListSitesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sites.GetSites() {
		if s.GetName() == site && s.GetHealthWarningCount() != 1 {
			t.Errorf("site %s: health_warning_count %d, want 1", site, s.GetHealthWarningCount())
		}
	}
	if r := f.run("get", "devices", "--site", site, "--health-warning", "-o", "name"); r.code != 0 || strings.TrimSpace(r.stdout) != site+"/"+warned.GetName() {
		t.Errorf("get devices --health-warning: want %s/%s only\n%v", site, warned.GetName(), r)
	}

	// The web device page and its timeline.
	tc, err := tlsutil.ClientConfig(f.ca, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+f.web+"/devices/"+target.GetDeviceId(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Forwarded-User", "ops-admin")
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: tc}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	page := string(body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, typ) || !strings.Contains(page, "FatalError") {
		t.Fatalf("web device page: %d, lacks %s / FatalError:\n%.2000s", resp.StatusCode, typ, page)
	}
	_, svg, _ := strings.Cut(page, `<svg class="timeline"`)
	svg, _, _ = strings.Cut(svg, "</svg>")
	if !strings.Contains(svg, typ) {
		t.Errorf("the web page's timeline has no lane for %s:\n%.3000s", typ, svg)
	}
}

// list0 is every device of the test's site.
func list0(ctx context.Context, t *testing.T, f *fleet) []*ironlinkv1.Device {
	t.Helper()
	r, err := f.api.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: site, PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	return r.GetDevices()
}

// getStatus is the hub's status of device id.
func getStatus(ctx context.Context, t *testing.T, f *fleet, id string) ironlinkv1.OperationalStatus {
	t.Helper()
	d, err := f.api.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: id})
	if err != nil {
		t.Fatal(err)
	}
	return d.GetDevice().GetStatus()
}

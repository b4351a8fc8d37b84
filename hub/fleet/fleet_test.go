package fleet_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/fleet"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// newStoreWithDevice migrates a fresh database, opens a store on it and
// reports one enrolled device for site-a; it returns the store, the
// database URL, the device id and a quiet logger.
func newStoreWithDevice(t *testing.T) (*store.Store, string, string, *slog.Logger) {
	t.Helper()
	ctx := context.Background()
	log := testlog.New(t)
	st, url := storetest.New(t, log)
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "site-a", Replica: "r"})
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	now := time.Now().UTC()
	if _, err := st.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{{
		DeviceID: id, ObservedTime: now,
		Conditions: []condition.Condition{{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}},
	}}}); err != nil {
		t.Fatal(err)
	}
	return st, url, id, log
}

// TestBadOperatorInputWritesNothing sends malformed, unknown and empty input
// to every mutating and reading RPC and checks the code and that no row of
// commands, impairment_history or status_history appeared.
func TestBadOperatorInputWritesNothing(t *testing.T) {
	ctx := context.Background()
	st, url, known, log := newStoreWithDevice(t)
	srv := fleet.NewServer(st, nil, log)
	count := func() int {
		return pgtest.Count(t, url, `SELECT (SELECT count(*) FROM commands) + (SELECT count(*) FROM impairment_history) + (SELECT count(*) FROM status_history)`)
	}
	before := count()

	tests := []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"quarantine unknown device", func() error {
			_, err := srv.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: uuid.NewString(), Reason: "x"})
			return err
		}, codes.NotFound},
		{"quarantine with empty reason", func() error {
			_, err := srv.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: known, Reason: "  "})
			return err
		}, codes.InvalidArgument},
		{"quarantine with malformed id", func() error {
			_, err := srv.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: "node-001'; DROP TABLE devices;--", Reason: "x"})
			return err
		}, codes.InvalidArgument},
		{"quarantine without id", func() error {
			_, err := srv.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{Reason: "x"})
			return err
		}, codes.InvalidArgument},
		{"quarantine with oversized reason", func() error {
			_, err := srv.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: known, Reason: strings.Repeat("x", 2000)})
			return err
		}, codes.InvalidArgument},
		{"release with invalid UTF-8 reason", func() error {
			_, err := srv.ReleaseDevice(ctx, &ironlinkv1.ReleaseDeviceRequest{DeviceId: known, Reason: "\xff\xfe"})
			return err
		}, codes.InvalidArgument},
		{"release unknown device", func() error {
			_, err := srv.ReleaseDevice(ctx, &ironlinkv1.ReleaseDeviceRequest{DeviceId: uuid.NewString(), Reason: "x"})
			return err
		}, codes.NotFound},
		{"get malformed device", func() error {
			_, err := srv.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: "nope"})
			return err
		}, codes.InvalidArgument},
		{"get unknown device", func() error {
			_, err := srv.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: uuid.NewString()})
			return err
		}, codes.NotFound},
		{"get unknown command", func() error {
			_, err := srv.GetCommand(ctx, &ironlinkv1.GetCommandRequest{CommandId: uuid.NewString()})
			return err
		}, codes.NotFound},
		{"list with bad page token", func() error {
			_, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{PageToken: "!!"})
			return err
		}, codes.InvalidArgument},
		{"list with page size too big", func() error {
			_, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{PageSize: 5000})
			return err
		}, codes.InvalidArgument},
		{"list with unspecified status filter", func() error {
			_, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Statuses: []ironlinkv1.OperationalStatus{0}})
			return err
		}, codes.InvalidArgument},
		{"list devices with an invalid site", func() error {
			_, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "BAD SITE"})
			return err
		}, codes.InvalidArgument},
		{"list commands with malformed device", func() error {
			_, err := srv.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{DeviceId: "x"})
			return err
		}, codes.InvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if got := status.Code(err); got != tc.want {
				t.Fatalf("code %v (%v), want %v", got, err, tc.want)
			}
			if after := count(); after != before {
				t.Fatalf("rows went from %d to %d", before, after)
			}
		})
	}
}

// TestQuarantineRecordsActorAndReason checks the happy path an operator sees.
func TestQuarantineRecordsActorAndReason(t *testing.T) {
	ctx := context.Background()
	st, _, id, log := newStoreWithDevice(t)
	srv := fleet.NewServer(st, func(context.Context) string { return "ops-alice" }, log)
	r, err := srv.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: strings.ToUpper(id), Reason: "Xid 79"})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetCommand().GetActor() != "ops-alice" || r.GetCommand().GetDeviceId() != id {
		t.Fatalf("command %v", r.GetCommand())
	}
	d, err := srv.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: id})
	if err != nil {
		t.Fatal(err)
	}
	h := d.GetImpairmentHistory()
	if len(h) != 1 || h[0].GetActor() != "ops-alice" || h[0].GetReason() != "Xid 79" || h[0].GetSource() != fleet.SourceOperatorAPI {
		t.Fatalf("history %v", h)
	}
	if d.GetDevice().GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_QUARANTINED {
		t.Fatalf("status %v", d.GetDevice().GetStatus())
	}
	q, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Impairments: []ironlinkv1.ImpairmentState{ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED}})
	if err != nil || len(q.GetDevices()) != 1 || q.GetDevices()[0].GetDeviceId() != id {
		t.Fatalf("quarantined filter: %v %v", q.GetDevices(), err)
	}
	n, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Impairments: []ironlinkv1.ImpairmentState{ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_UNSPECIFIED}})
	if err != nil || len(n.GetDevices()) != 0 {
		t.Fatalf("never-touched filter: %v %v", n.GetDevices(), err)
	}
}

// TestSitesShowConditionsAndOrphansAreListable: what an operator sees of
// site conditions and orphaned instances through the API.
func TestSitesShowConditionsAndOrphansAreListable(t *testing.T) {
	ctx := context.Background()
	st, _, clean, log := newStoreWithDevice(t)
	srv := fleet.NewServer(st, nil, log)
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "site-a", Replica: "r"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	seen := now.Add(-10 * time.Minute)
	if _, err := st.ReplaceSiteConditions(ctx, "site-a", sess.Epoch, []condition.Condition{
		{Type: condition.OpenStackAuthenticated, Status: condition.False, Reason: "AuthenticationFailed", Message: "Keystone answered 401", LastTransitionTime: now, ObservedTime: now},
		{Type: condition.OrphanDetection, Status: condition.True, Reason: "Compared", LastTransitionTime: now, ObservedTime: now},
	}); err != nil {
		t.Fatal(err)
	}
	orphan, serverID := uuid.NewString(), uuid.NewString()
	if _, err := st.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 2, Devices: []store.DeviceUpdate{{
		DeviceID: orphan, ObservedTime: now,
		Conditions: []condition.Condition{{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}},
		Facts: &store.Facts{Name: "node-2", InstanceMismatches: []store.InstanceMismatch{{
			Kind: store.MismatchNodeUnaware, NovaServerID: serverID, NovaServerStatus: "ACTIVE", NovaProjectID: "customer-1", FirstSeenTime: seen,
		}}},
	}}}); err != nil {
		t.Fatal(err)
	}

	sites, err := srv.ListSites(ctx, &ironlinkv1.ListSitesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sites.GetSites()) != 1 {
		t.Fatalf("sites %v", sites.GetSites())
	}
	site := sites.GetSites()[0]
	cs := site.GetConditions()
	if site.GetInstanceMismatchCount() != 1 || site.GetDeviceCount() != 2 || len(cs) != 2 ||
		cs[0].GetType() != "OpenStackAuthenticated" || cs[0].GetStatus() != ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE ||
		cs[0].GetReason() != "AuthenticationFailed" || cs[0].GetMessage() != "Keystone answered 401" ||
		!cs[0].GetLastTransitionTime().AsTime().Equal(now) || cs[1].GetType() != "OrphanDetection" {
		t.Fatalf("site %v", site)
	}

	list, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{InstanceMismatch: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetDevices()) != 1 || list.GetDevices()[0].GetDeviceId() != orphan {
		t.Fatalf("instance_mismatch filter: %v", list.GetDevices())
	}
	ms := list.GetDevices()[0].GetFacts().GetInstanceMismatches()
	if len(ms) != 1 || ms[0].GetKind() != ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NODE_UNAWARE ||
		ms[0].GetNovaServerId() != serverID || ms[0].GetNovaServerStatus() != "ACTIVE" || ms[0].GetNovaProjectId() != "customer-1" ||
		ms[0].GetIronicInstanceUuid() != "" || !ms[0].GetFirstSeenTime().AsTime().Equal(seen) {
		t.Fatalf("mismatches in ListDevices: %v", ms)
	}
	all, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{})
	if err != nil || len(all.GetDevices()) != 2 {
		t.Fatalf("without the filter: %v %v", all.GetDevices(), err)
	}
	g, err := srv.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: orphan})
	if err != nil || len(g.GetDevice().GetFacts().GetInstanceMismatches()) != 1 {
		t.Fatalf("GetDevice: %v %v", g.GetDevice().GetFacts(), err)
	}
	g, err = srv.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: clean})
	if err != nil || len(g.GetDevice().GetFacts().GetInstanceMismatches()) != 0 {
		t.Fatalf("GetDevice of a device without mismatches: %v %v", g.GetDevice().GetFacts(), err)
	}
	// The filter pages like the others.
	p1, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{InstanceMismatch: true, PageSize: 1, Site: "site-a"})
	if err != nil || len(p1.GetDevices()) != 1 || p1.GetNextPageToken() != "" {
		t.Fatalf("one page: %v next %q err %v", p1.GetDevices(), p1.GetNextPageToken(), err)
	}
}

// TestPageTokenIsBoundToItsFilters pages through ListDevices and
// ListCommands: a next_page_token continues the listing it came from (also
// with another page_size, AIP-158), and is refused with InvalidArgument
// naming page_token when sent with other filters, instead of continuing a
// different listing from the wrong place.
func TestPageTokenIsBoundToItsFilters(t *testing.T) {
	ctx := context.Background()
	st, _, first, log := newStoreWithDevice(t)
	srv := fleet.NewServer(st, nil, log)
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "site-a", Replica: "r"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	ids := []string{first}
	for i := 0; i < 4; i++ {
		id := uuid.NewString()
		ids = append(ids, id)
		if _, err := st.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: uint64(2 + i), Devices: []store.DeviceUpdate{{
			DeviceID: id, ObservedTime: now,
			Conditions: []condition.Condition{{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}},
		}}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids[:3] {
		if _, err := srv.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: id, Reason: "paging test"}); err != nil {
			t.Fatal(err)
		}
	}

	p1, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "site-a", PageSize: 2})
	if err != nil || len(p1.GetDevices()) != 2 || p1.GetNextPageToken() == "" {
		t.Fatalf("first page: %v next %q err %v", p1.GetDevices(), p1.GetNextPageToken(), err)
	}
	seen := map[string]bool{}
	for _, d := range p1.GetDevices() {
		seen[d.GetDeviceId()] = true
	}
	// Same filters, another page size: the rest of the listing.
	p2, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "site-a", PageSize: 10, PageToken: p1.GetNextPageToken()})
	if err != nil || p2.GetNextPageToken() != "" {
		t.Fatalf("second page: %v next %q err %v", p2.GetDevices(), p2.GetNextPageToken(), err)
	}
	for _, d := range p2.GetDevices() {
		if seen[d.GetDeviceId()] {
			t.Fatalf("device %s on both pages", d.GetDeviceId())
		}
		seen[d.GetDeviceId()] = true
	}
	if len(seen) != len(ids) {
		t.Fatalf("two pages held %d devices, want %d", len(seen), len(ids))
	}

	refused := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.InvalidArgument || len(grpcerr.Fields(err)) != 1 || grpcerr.Fields(err)[0] != "page_token" ||
			!strings.Contains(status.Convert(err).Message(), "other filters") {
			t.Fatalf("%s: %v, want InvalidArgument naming page_token and other filters", what, err)
		}
	}
	_, err = srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "site-a", PageSize: 2, PageToken: p1.GetNextPageToken(),
		Statuses: []ironlinkv1.OperationalStatus{ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_QUARANTINED}})
	refused("ListDevices with a status filter added", err)
	_, err = srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{PageSize: 2, PageToken: p1.GetNextPageToken()})
	refused("ListDevices without the site", err)

	c1, err := srv.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{Site: "site-a", PageSize: 2})
	if err != nil || len(c1.GetCommands()) != 2 || c1.GetNextPageToken() == "" {
		t.Fatalf("first page of commands: %v next %q err %v", c1.GetCommands(), c1.GetNextPageToken(), err)
	}
	c2, err := srv.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{Site: "site-a", PageSize: 2, PageToken: c1.GetNextPageToken()})
	if err != nil || len(c2.GetCommands()) != 1 || c2.GetNextPageToken() != "" {
		t.Fatalf("second page of commands: %v next %q err %v", c2.GetCommands(), c2.GetNextPageToken(), err)
	}
	_, err = srv.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{DeviceId: ids[0], PageSize: 2, PageToken: c1.GetNextPageToken()})
	refused("ListCommands for one device with a site's token", err)
	// A token of one RPC is not one of another.
	_, err = srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "site-a", PageSize: 2, PageToken: c1.GetNextPageToken()})
	refused("ListDevices with a ListCommands token", err)
}

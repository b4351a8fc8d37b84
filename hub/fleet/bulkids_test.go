package fleet_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/grpctest"
)

// A selector's device_ids (the web's ticked rows) pick exactly those
// devices, ANDed with the other terms; the quarantine of the ticked rows is
// one request (one transaction, one request id); a malformed UUID is
// InvalidArgument naming the entry and more than 1000 ids are refused.
func TestBulkByDeviceIDs(t *testing.T) {
	st, url := bulkFleet(t)
	h := grpctest.Start(t, st, grpctest.Options{})
	ctx := context.Background()
	bulk := ironlinkv1.NewBulkServiceClient(h.Operator(t, "ops"))
	id := func(name string) string {
		return pgtest.QueryString(t, url, `SELECT id::text FROM devices WHERE name = $1`, name)
	}
	ticked := []string{id("a-gpu-01"), id("a-gpu-02"), id("b-gpu-01")}

	p, err := bulk.PreviewBulkImpairment(ctx, &ironlinkv1.PreviewBulkImpairmentRequest{Selector: &ironlinkv1.DeviceSelector{DeviceIds: ticked}})
	if err != nil || p.GetCount() != 3 {
		t.Fatalf("ids only: count %d, %v; want 3", p.GetCount(), err)
	}
	// AND with the other terms: site-a and FAULTED leaves a-gpu-01.
	p, err = bulk.PreviewBulkImpairment(ctx, &ironlinkv1.PreviewBulkImpairmentRequest{
		Selector: &ironlinkv1.DeviceSelector{Site: "site-a", Statuses: faulted, DeviceIds: ticked}})
	if err != nil || p.GetCount() != 1 || p.GetDevices()[0].GetName() != "a-gpu-01" {
		t.Fatalf("ids and site and status: %v, %v; want a-gpu-01 only", p.GetDevices(), err)
	}
	// A hardware-facts term ANDs too: no device has hardware, so nothing.
	p, err = bulk.PreviewBulkImpairment(ctx, &ironlinkv1.PreviewBulkImpairmentRequest{
		Selector: &ironlinkv1.DeviceSelector{DeviceIds: ticked, HardwareFacts: map[string]string{"gpu_count": "8"}}})
	if err != nil || p.GetCount() != 0 {
		t.Fatalf("ids and hardware facts: count %d, %v; want 0", p.GetCount(), err)
	}

	q, err := bulk.BulkQuarantine(ctx, &ironlinkv1.BulkQuarantineRequest{
		Selector: &ironlinkv1.DeviceSelector{DeviceIds: ticked}, Reason: "ticked rows", ExpectedCount: 3})
	if err != nil || len(q.GetCommands()) != 3 {
		t.Fatalf("quarantine ticked rows: %v, %v", q.GetCommands(), err)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM commands WHERE request_id = $1`, q.GetRequestId()); n != 3 {
		t.Fatalf("commands of request %s: %d, want 3 (one transaction)", q.GetRequestId(), n)
	}

	before := bulkRows(t, url)
	_, err = bulk.BulkRelease(ctx, &ironlinkv1.BulkReleaseRequest{
		Selector: &ironlinkv1.DeviceSelector{DeviceIds: []string{ticked[0], "ce7c6a1d-nope"}}, Reason: "x", ExpectedCount: 2})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "selector.device_ids[1]") {
		t.Fatalf("malformed id: %v, want InvalidArgument naming selector.device_ids[1]", err)
	}
	many := make([]string, 1001)
	for i := range many {
		many[i] = uuid.NewString()
	}
	_, err = bulk.PreviewBulkImpairment(ctx, &ironlinkv1.PreviewBulkImpairmentRequest{Selector: &ironlinkv1.DeviceSelector{DeviceIds: many}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "device_ids") {
		t.Fatalf("1001 ids: %v, want InvalidArgument naming device_ids", err)
	}
	if after := bulkRows(t, url); after != before {
		t.Fatalf("refused calls wrote %d rows", after-before)
	}
}
